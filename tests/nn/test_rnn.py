"""Recurrent layers and cells: PyTorch fixtures (tests/data/rnn_fixtures.npz, written by
tools/make_rnn_fixtures.py), numpy references, gradients, packed sequences and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn
from singa_tensor.nn.utils_rnn import (
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
)
from singa_tensor.ops.rnn import gru_cell, lstm_cell, split_rows

from ..helpers import to_numpy

FIXTURES = np.load(Path(__file__).resolve().parents[1] / "data" / "rnn_fixtures.npz")
F64 = st.float64


def _t(a, requires_grad=False):
    return st.tensor(np.asarray(a), dtype=F64 if np.asarray(a).dtype.kind == "f" else None,
                     requires_grad=requires_grad)


def _np(t):
    return to_numpy(t)


def _close(got, want, tol=1e-9):
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


# ---- PyTorch fixtures --------------------------------------------------------------------------

CASES = {
    "lstm": (nn.LSTM, dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True)),
    "lstm_proj": (nn.LSTM, dict(input_size=3, hidden_size=5, num_layers=2, proj_size=2,
                                bidirectional=True)),
    "gru": (nn.GRU, dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True,
                         batch_first=True)),
    "rnn_tanh": (nn.RNN, dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True)),
    "rnn_relu": (nn.RNN, dict(input_size=3, hidden_size=4, num_layers=1,
                              nonlinearity="relu")),
    "lstm_packed": (nn.LSTM, dict(input_size=3, hidden_size=4, num_layers=2,
                                  bidirectional=True)),
    "gru_packed": (nn.GRU, dict(input_size=3, hidden_size=4, bidirectional=True)),
}


def _fixture_layer(name):
    cls, kwargs = CASES[name]
    layer = cls(**kwargs, dtype=F64)
    prefix = name + "."
    state = {k[len(prefix):]: _t(v) for k, v in FIXTURES.items() if k.startswith(prefix)}
    layer.load_state_dict(state)
    return layer, kwargs


@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch_fixture(name):
    layer, kwargs = _fixture_layer(name)
    run = {k.split(":", 1)[1]: v for k, v in FIXTURES.items() if k.startswith(name + ":")}
    x = _t(run["input"], requires_grad=True)
    hx = (_t(run["h0"]), _t(run["c0"])) if "c0" in run else _t(run["h0"])
    if "lengths" in run:
        packed = pack_padded_sequence(x, run["lengths"].tolist(),
                                      batch_first=kwargs.get("batch_first", False),
                                      enforce_sorted=False)
        out, state = layer(packed, hx)
        assert isinstance(out, PackedSequence)
        out, lengths = pad_packed_sequence(out, batch_first=kwargs.get("batch_first", False))
        assert lengths.tolist() == run["lengths"].tolist()
    else:
        out, state = layer(x, hx)
    _close(out, run["output"])
    if "c0" in run:
        _close(state[0], run["h_n"])
        _close(state[1], run["c_n"])
    else:
        _close(state, run["h_n"])
    out.sum().backward()
    _close(x.grad, run["grad_input"])
    for pname, p in layer.named_parameters():
        _close(p.grad, run["grad." + pname])


# ---- numpy references --------------------------------------------------------------------------


def _np_layer(mode, params, x, h0, c0=None, nonlinearity="tanh"):
    """One unidirectional layer in numpy, time-major x (T, B, I)."""
    w_ih, w_hh, b_ih, b_hh = params
    h, c, outs = h0, c0, []
    for xt in x:
        gx, gh = xt @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        if mode == "LSTM":
            i, f, g, o = np.split(gx + gh, 4, axis=1)
            c = _sig(f) * c + _sig(i) * np.tanh(g)
            h = _sig(o) * np.tanh(c)
        elif mode == "GRU":
            xr, xz, xn = np.split(gx, 3, axis=1)
            hr, hz, hn = np.split(gh, 3, axis=1)
            r, z = _sig(xr + hr), _sig(xz + hz)
            h = (1 - z) * np.tanh(xn + r * hn) + z * h
        else:
            a = gx + gh
            h = np.tanh(a) if nonlinearity == "tanh" else np.maximum(a, 0)
        outs.append(h)
    return np.stack(outs), h, c


@pytest.mark.parametrize("cls, mode, kw", [(nn.LSTM, "LSTM", {}), (nn.GRU, "GRU", {}),
                                           (nn.RNN, "RNN", {"nonlinearity": "relu"}),
                                           (nn.RNN, "RNN", {})])
def test_layer_against_numpy(cls, mode, kw):
    st.manual_seed(0)
    layer = cls(3, 5, **kw, dtype=F64)
    r = np.random.default_rng(1)
    x, h0, c0 = r.standard_normal((6, 2, 3)), r.standard_normal((1, 2, 5)), \
        r.standard_normal((1, 2, 5))
    params = [_np(p) for p in layer.parameters()]
    want, h_n, c_n = _np_layer(mode, params, x, h0[0], c0[0], kw.get("nonlinearity", "tanh"))
    hx = (_t(h0), _t(c0)) if mode == "LSTM" else _t(h0)
    out, state = layer(_t(x), hx)
    _close(out, want)
    _close(state[0] if mode == "LSTM" else state, h_n[None])
    if mode == "LSTM":
        _close(state[1], c_n[None])


@pytest.mark.parametrize("cls, mode", [(nn.LSTMCell, "LSTM"), (nn.GRUCell, "GRU"),
                                       (nn.RNNCell, "RNN")])
def test_cells_against_numpy(cls, mode):
    cell = cls(3, 4, dtype=F64)
    r = np.random.default_rng(2)
    x, h, c = r.standard_normal((2, 3)), r.standard_normal((2, 4)), r.standard_normal((2, 4))
    params = [_np(p) for p in cell.parameters()]
    _, h_n, c_n = _np_layer(mode, params, x[None], h, c)
    if mode == "LSTM":
        got_h, got_c = cell(_t(x), (_t(h), _t(c)))
        _close(got_c, c_n)
        unb = cell(_t(x[0]), (_t(h[0]), _t(c[0])))
        _close(unb[0], h_n[0])
    else:
        got_h = cell(_t(x), _t(h))
        _close(cell(_t(x[0]), _t(h[0])), h_n[0])
    _close(got_h, h_n)


def test_fused_cells_float32_against_reference():
    r = np.random.default_rng(3)
    gx, gh, b, c = (r.standard_normal(s).astype(np.float32) for s in ((4, 12), (4, 12), 12,
                                                                      (4, 3)))
    h, c2 = lstm_cell(st.tensor(gx), st.tensor(gh), st.tensor(b), st.tensor(c))
    a = gx + gh + b
    i, f, g, o = np.split(a, 4, axis=1)
    want_c = _sig(f) * c + _sig(i) * np.tanh(g)
    np.testing.assert_allclose(to_numpy(c2), want_c, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(to_numpy(h), _sig(o) * np.tanh(want_c), rtol=2e-5, atol=2e-6)


# ---- gradients ---------------------------------------------------------------------------------


def _rand(*shape, seed=0):
    return _t(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_lstm_cell_gradcheck_and_gradgradcheck(bias):
    args = [_rand(2, 8, seed=1), _rand(2, 8, seed=2), _rand(8, seed=3) if bias else None,
            _rand(2, 2, seed=4)]
    inputs = [a for a in args if a is not None]

    def fn(*ts):
        it = iter(ts)
        gx, gh = next(it), next(it)
        b = next(it) if bias else None
        return lstm_cell(gx, gh, b, next(it))

    assert st.autograd.gradcheck(fn, inputs, atol=1e-6, rtol=1e-4)
    assert st.autograd.gradgradcheck(fn, inputs, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_gru_cell_gradcheck_and_gradgradcheck(bias):
    args = [_rand(2, 6, seed=5), _rand(2, 6, seed=6), _rand(6, seed=7) if bias else None,
            _rand(2, 2, seed=8)]
    inputs = [a for a in args if a is not None]

    def fn(*ts):
        it = iter(ts)
        gx, gh = next(it), next(it)
        b = next(it) if bias else None
        return gru_cell(gx, gh, b, next(it))

    assert st.autograd.gradcheck(fn, inputs, atol=1e-6, rtol=1e-4)
    assert st.autograd.gradgradcheck(fn, inputs, atol=1e-5, rtol=1e-3)


def test_split_rows_gradcheck():
    x = _rand(5, 2, seed=9)
    assert st.autograd.gradcheck(lambda t: split_rows(t, (2, 0, 3)), [x])
    assert st.autograd.gradgradcheck(lambda t: split_rows(t, (1, 4)), [x])


@pytest.mark.parametrize("cls, kw", [
    (nn.LSTM, dict(num_layers=2, bidirectional=True)),
    (nn.LSTM, dict(proj_size=1)),
    (nn.GRU, dict(num_layers=2, bidirectional=True)),
    (nn.RNN, dict(bidirectional=True)),
])
def test_layer_gradcheck(cls, kw):
    st.manual_seed(3)
    layer = cls(2, 2, **kw, dtype=F64)
    n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    hs = kw.get("proj_size") or 2
    x, h0, c0 = _rand(3, 2, 2, seed=10), _rand(n, 2, hs, seed=11), _rand(n, 2, 2, seed=12)
    if cls is nn.LSTM:
        def fn(x, h0, c0):
            out, (h, c) = layer(x, (h0, c0))
            return out, h, c
        inputs = [x, h0, c0]
    else:
        def fn(x, h0):
            out, h = layer(x, h0)
            return out, h
        inputs = [x, h0]
    assert st.autograd.gradcheck(fn, inputs, atol=1e-6, rtol=1e-4)


def test_layer_gradgradcheck_packed():
    st.manual_seed(4)
    layer = nn.LSTM(2, 2, bidirectional=True, dtype=F64)
    x = _rand(3, 2, 2, seed=13)

    def fn(x):
        out, _ = layer(pack_padded_sequence(x, [1, 3], enforce_sorted=False))
        return pad_packed_sequence(out)[0]

    assert st.autograd.gradcheck(fn, [x], atol=1e-6, rtol=1e-4)
    assert st.autograd.gradgradcheck(fn, [x], atol=1e-5, rtol=1e-3)


# ---- packed sequences --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_matches_per_sequence_runs(cls, batch_first):
    st.manual_seed(5)
    layer = cls(3, 4, num_layers=2, bidirectional=True, batch_first=batch_first, dtype=F64)
    lengths = [2, 5, 1, 3]
    r = np.random.default_rng(14)
    x = r.standard_normal((4, 5, 3) if batch_first else (5, 4, 3))
    packed = pack_padded_sequence(_t(x), lengths, batch_first=batch_first,
                                  enforce_sorted=False)
    out, state = layer(packed)
    padded, _ = pad_packed_sequence(out, batch_first=batch_first)
    padded = _np(padded)
    h_n = _np(state[0] if cls is nn.LSTM else state)
    for b, n in enumerate(lengths):
        seq = x[b, :n] if batch_first else x[:n, b]
        o, s = layer(_t(seq))  # unbatched run of this sequence alone
        want = padded[b, :n] if batch_first else padded[:n, b]
        _close(o, want)
        rest = padded[b, n:] if batch_first else padded[n:, b]
        assert not rest.any()
        _close(s[0] if cls is nn.LSTM else s, h_n[:, b])


def test_pack_pad_roundtrip_and_gradient():
    x = _rand(4, 3, 2, seed=15)
    p = pack_padded_sequence(x, [4, 2, 1])
    assert p.batch_sizes.tolist() == [3, 2, 1, 1]
    assert p.sorted_indices is None
    padded, lengths = pad_packed_sequence(p, total_length=6, padding_value=-1.0)
    assert padded.shape == (6, 3, 2) and lengths.tolist() == [4, 2, 1]
    xn = _np(x)
    mask = np.arange(6)[:, None] < np.array([4, 2, 1])[None, :]
    want = np.where(mask[..., None], np.concatenate([xn, np.zeros((2, 3, 2))]), -1.0)
    _close(padded, want)
    padded.sum().backward()
    _close(x.grad, np.broadcast_to(mask[:4, :, None], (4, 3, 2)).astype(float))


def test_pad_sequence_and_pack_sequence():
    a, b = st.tensor([[1.0], [2.0], [3.0]]), st.tensor([[4.0]])
    _close(pad_sequence([a, b]), [[[1.0], [4.0]], [[2.0], [0.0]], [[3.0], [0.0]]])
    _close(pad_sequence([a, b], batch_first=True, padding_value=9.0, padding_side="left"),
           [[[1.0], [2.0], [3.0]], [[9.0], [9.0], [4.0]]])
    p = pack_sequence([b, a], enforce_sorted=False)
    assert p.data.tolist() == [[1.0], [4.0], [2.0], [3.0]]
    assert p.unsorted_indices.tolist() == [1, 0]


# ---- layer options -----------------------------------------------------------------------------


def test_batch_first_and_unbatched_agree():
    st.manual_seed(6)
    tm = nn.GRU(3, 4, num_layers=2, dtype=F64)
    bf = nn.GRU(3, 4, num_layers=2, batch_first=True, dtype=F64)
    bf.load_state_dict(tm.state_dict())
    x = np.random.default_rng(16).standard_normal((5, 2, 3))
    o1, h1 = tm(_t(x))
    o2, h2 = bf(_t(x.transpose(1, 0, 2)))
    _close(o2, _np(o1).transpose(1, 0, 2))
    _close(h2, _np(h1))
    o3, h3 = tm(_t(x[:, 1]), _t(np.zeros((2, 4))))
    _close(o3, _np(o1)[:, 1])
    assert h3.shape == (2, 4)


def test_parameters_names_shapes_and_init():
    lstm = nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {k: v.shape for k, v in lstm.state_dict().items()}
    assert shapes["weight_ih_l0"] == (24, 3) and shapes["weight_hh_l0_reverse"] == (24, 2)
    assert shapes["weight_ih_l1"] == (24, 4) and shapes["weight_hr_l1_reverse"] == (2, 6)
    assert len(shapes) == 20
    bound = 1 / np.sqrt(6)
    vals = np.concatenate([_np(p).ravel() for p in lstm.parameters()])
    assert vals.min() >= -bound and vals.max() <= bound and vals.std() > bound / 3
    assert [k for k in nn.GRU(2, 3, bias=False).state_dict()] == ["weight_ih_l0",
                                                                 "weight_hh_l0"]


def test_dropout_between_layers_only_in_training():
    st.manual_seed(7)
    layer = nn.LSTM(3, 8, num_layers=2, dropout=0.5, dtype=F64)
    plain = nn.LSTM(3, 8, num_layers=2, dtype=F64)
    plain.load_state_dict(layer.state_dict())
    x = _t(np.random.default_rng(17).standard_normal((4, 2, 3)))
    layer.eval()
    _close(layer(x)[0], _np(plain(x)[0]))
    layer.train()
    assert not np.allclose(_np(layer(x)[0]), _np(plain(x)[0]))


def test_float32_layer_runs_and_trains():
    st.manual_seed(8)
    layer = nn.LSTM(4, 8)
    out, (h, c) = layer(st.randn(6, 3, 4))
    out.sum().backward()
    assert out.dtype is st.float32 and layer.weight_hh_l0.grad.shape == (32, 8)


# ---- bad input ---------------------------------------------------------------------------------


def test_constructor_errors():
    with pytest.raises(ValueError, match="RNN: unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="RNNCell: unknown nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match=r"LSTM: proj_size \(4\) has to be smaller than "
                                         r"hidden_size \(4\)"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="GRU: proj_size argument is only supported for LSTM"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match=r"GRU: dropout should be a number in range \[0, 1\]"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="LSTM: hidden_size must be a positive int"):
        nn.LSTM(3, 0)


def test_forward_errors():
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match=r"LSTM: input.size\(-1\) must be equal to input_size. "
                                         "Expected 3, got 5"):
        lstm(st.zeros(2, 1, 5))
    with pytest.raises(ValueError, match=r"LSTM: expected h_0 of shape \(2, 1, 4\), got "
                                         r"\(1, 1, 4\)"):
        lstm(st.zeros(2, 1, 3), (st.zeros(1, 1, 4), st.zeros(2, 1, 4)))
    with pytest.raises(ValueError, match="LSTM: for batched 3-D input, h_0 should also be 3-D"):
        lstm(st.zeros(2, 1, 3), (st.zeros(2, 4), st.zeros(2, 4)))
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        lstm(st.zeros(2, 1, 3), st.zeros(2, 1, 4))
    with pytest.raises(ValueError, match="GRU: expected input to be 2-D or 3-D, got 4-D"):
        nn.GRU(3, 4)(st.zeros(1, 2, 1, 3))
    with pytest.raises(ValueError, match=r"RNN: expected hx of shape \(1, 4\), got \(1, 5\)"):
        nn.RNN(3, 4)(st.zeros(2, 3), st.zeros(1, 5))
    with pytest.raises(TypeError, match="GRU: input has dtype float64 but the parameters"):
        nn.GRU(3, 4)(st.zeros(2, 1, 3, dtype=F64))
    with pytest.raises(ValueError, match="LSTMCell: input has inconsistent input_size: got 2, "
                                         "expected 3"):
        nn.LSTMCell(3, 4)(st.zeros(1, 2))
    with pytest.raises(ValueError, match=r"GRUCell: expected hx of shape \(2, 4\), got \(1, 4\)"):
        nn.GRUCell(3, 4)(st.zeros(2, 3), st.zeros(1, 4))


def test_packing_errors():
    x = st.zeros(3, 2, 1)
    with pytest.raises(ValueError, match="pack_padded_sequence: `lengths` array must be sorted "
                                         "in decreasing order"):
        pack_padded_sequence(x, [1, 3])
    with pytest.raises(ValueError, match="pack_padded_sequence: length of all samples has to "
                                         "be greater than 0"):
        pack_padded_sequence(x, [3, 0])
    with pytest.raises(ValueError, match="pack_padded_sequence: expected 2 lengths"):
        pack_padded_sequence(x, [3])
    with pytest.raises(ValueError, match=r"pack_padded_sequence: a length \(4\) exceeds"):
        pack_padded_sequence(x, [4, 1])
    with pytest.raises(ValueError, match="pad_packed_sequence: expected total_length to be at "
                                         "least"):
        pad_packed_sequence(pack_padded_sequence(x, [3, 1]), total_length=2)
    with pytest.raises(ValueError, match=r"lstm_cell: gates_x must have shape \(2, 8\)"):
        lstm_cell(st.zeros(2, 4), st.zeros(2, 8), None, st.zeros(2, 2))
    with pytest.raises(ValueError, match=r"split_rows: sizes \(1, 1\) do not split"):
        split_rows(st.zeros(3), (1, 1))


def test_recurrent_matmul_shares_one_weight_gradient():
    from singa_tensor.ops.rnn import recurrent_matmul

    w, h0 = _rand(3, 3, seed=18), _rand(2, 3, seed=19)

    def fn(h0, w):
        tape: list = []
        h1 = recurrent_matmul(h0, w, tape, True).tanh()
        h2 = recurrent_matmul(h1[:1], w, tape, False).tanh()
        return h1, h2

    assert st.autograd.gradcheck(fn, [h0, w], atol=1e-6, rtol=1e-4)
    assert st.autograd.gradgradcheck(fn, [h0, w], atol=1e-5, rtol=1e-3)
    with pytest.raises(ValueError, match="recurrent_matmul: h of shape"):
        recurrent_matmul(st.zeros(2, 2), st.zeros(3, 3), [], True)
