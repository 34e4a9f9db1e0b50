"""The whole-loop recurrent kernel (st_rnn_seq_forward/backward, ops.rnn.recurrent_sequence)
against the per-step loop it replaces in nn.RNN/LSTM/GRU: outputs, final states and the
gradients of the input, the initial states and every weight and bias, on the device under test
(the CUDA emulator reruns this file).

Tolerances: both paths run the same cell math and one product per step, so they differ only by
the summation order of the products (BLAS blocking) and of the weight-gradient sums (one
product over all steps against one per step, added up): relative 2e-5 (float32) and 1e-11
(float64) of each tensor's largest magnitude."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn
from singa_tensor.ops.rnn import RecurrentSequence, recurrent_sequence

from .helpers import to_numpy

TOL = {"float32": 2e-5, "float64": 1e-11}
DTYPES = {"float32": st.float32, "float64": st.float64}
LAYERS = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN_TANH": nn.RNN, "RNN_RELU": nn.RNN}


def _close(got, want, dtype, what):
    got, want = to_numpy(got), to_numpy(want)
    assert got.shape == want.shape, what
    scale = max(float(np.abs(want).max()), 1.0)
    err = float(np.abs(got - want).max())
    assert err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} (scale {scale:.3g})"


def _layer(mode, layers, bidirectional, batch_first, dtype, bias=True):
    st.manual_seed(7)
    kw = {"nonlinearity": "relu" if mode == "RNN_RELU" else "tanh"} if mode.startswith("RNN") \
        else {}
    return LAYERS[mode](5, 6, layers, bias=bias, batch_first=batch_first,
                        bidirectional=bidirectional, dtype=DTYPES[dtype], **kw)


def _run(layer, fused, x, states):
    """(outputs, gradients of input, states and parameters) with the whole-loop kernel on or
    off; the loss weighs every output with fixed random weights so no gradient is symmetric."""
    layer._sequence_kernel = fused
    layer.zero_grad()
    x = x.detach().requires_grad_()
    hx = None
    leaves = [x]
    if states is not None:
        states = [s.detach().requires_grad_() for s in states]
        leaves += states
        hx = tuple(states) if len(states) == 2 else states[0]
    out, hidden = layer(x, hx)
    finals = list(hidden) if isinstance(hidden, tuple) else [hidden]
    r = np.random.default_rng(3)
    loss = None
    for t in [out, *finals]:
        w = st.tensor(r.standard_normal(t.shape), dtype=t.dtype)
        term = (t * w).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    grads = [t.grad for t in leaves] + [p.grad for _, p in layer.named_parameters()]
    return [out, *finals], grads


def _ops_in_graph(t) -> list:
    """The names of the graph nodes t was computed through, each node once."""
    seen, todo, names = set(), [t._node], []
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(getattr(node, "name", ""))
        todo += [e[0] for e in getattr(node, "next", ()) if e is not None]
    return names


CASES = [
    # mode, layers, bidirectional, batch_first, with initial state
    ("LSTM", 1, False, False, False),
    ("LSTM", 2, True, True, True),
    ("LSTM", 2, False, False, True),
    ("LSTM", 1, True, False, False),
    ("GRU", 1, False, True, True),
    ("GRU", 2, True, False, False),
    ("GRU", 2, False, True, True),
    ("RNN_TANH", 2, True, False, True),
    ("RNN_RELU", 1, False, True, False),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode, layers, bidirectional, batch_first, with_state", CASES)
def test_layer_equals_the_per_step_loop(mode, layers, bidirectional, batch_first, with_state,
                                        dtype):
    layer = _layer(mode, layers, bidirectional, batch_first, dtype)
    steps, batch = 4, 3
    r = np.random.default_rng(11)
    shape = (batch, steps, 5) if batch_first else (steps, batch, 5)
    x = st.tensor(r.standard_normal(shape), dtype=DTYPES[dtype])
    states = None
    if with_state:
        n = layers * (2 if bidirectional else 1)
        k = 2 if mode == "LSTM" else 1
        states = [st.tensor(r.standard_normal((n, batch, 6)), dtype=DTYPES[dtype])
                  for _ in range(k)]
    got_out, got_grads = _run(layer, True, x, states)
    want_out, want_grads = _run(layer, False, x, states)
    assert _ops_in_graph(got_out[0]).count("_recurrent_sequence") == layers * (
        2 if bidirectional else 1)
    assert "_recurrent_sequence" not in _ops_in_graph(want_out[0])
    for i, (g, w) in enumerate(zip(got_out, want_out)):
        _close(g, w, dtype, f"output {i}")
    names = ["input"] + [f"state {i}" for i in range(len(states or []))] + \
        [n for n, _ in layer.named_parameters()]
    for name, g, w in zip(names, got_grads, want_grads):
        assert g is not None and w is not None, name
        _close(g, w, dtype, f"d {name}")


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
@pytest.mark.parametrize("batch", [1, 7, 13, 20])
@pytest.mark.parametrize("steps", [2, 6])
def test_float32_sizes_that_fill_the_step_product_tiles(mode, batch, steps, simd_build):
    """The float32 per-step products run the few-row kernels (cpp/src/small_gemm.h), 8 lanes
    wide or, where the CPU has AVX-512, 16: hidden 37 and input 19 give full vector blocks plus
    partial ones along every dimension in both widths (and a last packed panel of 4 columns of
    4 * 37), and batches 1, 7, 13 and 20 full and partial tiles of rows (the products' rows are
    the batch). Two steps read the recurrent weight where it lies, six pack it first."""
    st.manual_seed(5)
    kw = {"nonlinearity": "tanh"} if mode.startswith("RNN") else {}
    layer = LAYERS[mode](19, 37, 2, bidirectional=True, dtype=st.float32, **kw)
    r = np.random.default_rng(13)
    x = st.tensor(r.standard_normal((steps, batch, 19)), dtype=st.float32)
    states = [st.tensor(r.standard_normal((4, batch, 37)), dtype=st.float32)
              for _ in range(2 if mode == "LSTM" else 1)]
    got_out, got_grads = _run(layer, True, x, states)
    want_out, want_grads = _run(layer, False, x, states)
    for i, (g, w) in enumerate(zip(got_out + got_grads, want_out + want_grads)):
        _close(g, w, "float32", f"{mode} batch {batch} tensor {i}")


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_no_bias_unbatched_and_single_step(mode):
    layer = _layer(mode, 1, True, False, "float64", bias=False)
    r = np.random.default_rng(12)
    for shape in [(4, 5), (1, 2, 5)]:  # unbatched; one time step
        x = st.tensor(r.standard_normal(shape), dtype=st.float64)
        got_out, got_grads = _run(layer, True, x, None)
        want_out, want_grads = _run(layer, False, x, None)
        for g, w in zip(got_out + got_grads, want_out + want_grads):
            _close(g, w, "float64", f"{mode} {shape}")


def test_inference_without_grad_equals_training_forward():
    layer = _layer("LSTM", 2, True, False, "float32")
    x = st.tensor(np.random.default_rng(13).standard_normal((6, 2, 5)), dtype=st.float32)
    with st.no_grad():
        out, (h, c) = layer(x)
    out2, (h2, c2) = layer(x)
    for a, b in [(out, out2), (h, h2), (c, c2)]:
        _close(a, b, "float32", "no_grad forward")
    assert not out.requires_grad and out2.requires_grad


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_double_backward_equals_the_per_step_loop(mode):
    # create_graph: the sequence op's backward is a composition, so d/dw of a gradient norm
    # matches the per-step cells' (themselves twice differentiable)
    layer = _layer(mode, 1, True, False, "float64")
    x0 = st.tensor(np.random.default_rng(14).standard_normal((3, 2, 5)), dtype=st.float64)
    res = []
    for fused in (True, False):
        layer._sequence_kernel = fused
        layer.zero_grad()
        x = x0.detach().requires_grad_()
        out, _ = layer(x)
        (gx,) = st.autograd.grad((out * out).sum(), x, create_graph=True)
        (gx * gx).sum().backward()
        res.append([p.grad for p in layer.parameters()])
    for g, w in zip(*res):
        _close(g, w, "float64", "second-order gradient")


def test_op_gradcheck_and_gradgradcheck():
    for args, _ in RecurrentSequence.samples():
        idx = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
        xs = [st.tensor(args[i], dtype=st.float64, requires_grad=True) for i in idx]

        def call(*ts, args=args, idx=idx):
            full = list(args)
            for i, t in zip(idx, ts):
                full[i] = t
            return recurrent_sequence(*full)

        assert st.autograd.gradcheck(call, xs, atol=1e-5, rtol=1e-3), args[0]
        assert st.autograd.gradgradcheck(call, xs, atol=1e-4, rtol=1e-3), args[0]


def test_packed_unequal_lengths_keep_the_per_step_loop():
    # sequences that end at different steps are not one kernel's loop: the layer must still
    # give each sequence's own final state
    from singa_tensor.nn.utils_rnn import pack_padded_sequence

    layer = _layer("LSTM", 1, False, False, "float64")
    x = st.tensor(np.random.default_rng(15).standard_normal((4, 2, 5)), dtype=st.float64)
    packed = pack_padded_sequence(x, [4, 2])
    _, (h, _) = layer(packed)
    _, (h_short, _) = layer(x[:2, 1:2])
    _close(h[:, 1:2], h_short, "float64", "final state of the shorter sequence")


def _t(*shape, dtype=st.float32):
    return st.zeros(*shape, dtype=dtype)


@pytest.mark.parametrize("args, exc, text", [
    (("LSTMX", _t(4, 8), _t(8, 2), None, _t(2, 2), _t(2, 2)), ValueError, "unknown mode"),
    (("LSTM", _t(4, 8), _t(8, 2), None, _t(2, 2)), TypeError, "needs c0"),
    (("GRU", _t(4, 6), _t(6, 2), None, _t(2, 2), _t(2, 2)), TypeError, "c0 must be None"),
    (("LSTM", _t(4, 8), _t(8, 2), _t(8), _t(2, 2), _t(2, 2)), TypeError, "bias_h must be None"),
    (("LSTM", _t(5, 8), _t(8, 2), None, _t(2, 2), _t(2, 2)), ValueError, "gates_x must have"),
    (("LSTM", _t(4, 6), _t(8, 2), None, _t(2, 2), _t(2, 2)), ValueError, "gates_x must have"),
    (("LSTM", _t(4, 8), _t(8, 3), None, _t(2, 2), _t(2, 2)), ValueError, "w_hh must have"),
    (("LSTM", _t(4, 8), _t(8, 2), None, _t(2, 2), _t(1, 2)), ValueError, "c0 must have"),
    (("GRU", _t(4, 6), _t(6, 2), _t(5), _t(2, 2)), ValueError, "bias_h must have"),
    (("GRU", _t(4, 6), _t(6, 2), None, _t(2)), ValueError, "h0 must be a non-empty 2-D"),
    (("GRU", _t(4, 6), _t(6, 2), None, _t(2, 2, dtype=st.float64)), TypeError, "dtype"),
    (("GRU", _t(4, 6, dtype=st.int64), _t(6, 2, dtype=st.int64), None,
      _t(2, 2, dtype=st.int64)), TypeError, "float32 or float64"),
    (("GRU", [[0.0]], _t(6, 2), None, _t(2, 2)), TypeError, "gates_x must be a Tensor"),
])
def test_bad_operands_raise_clear_errors(args, exc, text):
    with pytest.raises(exc, match=text):
        recurrent_sequence(*args)


def test_layer_bad_state_shape_still_names_the_layer():
    layer = nn.LSTM(5, 6)
    x = st.zeros(4, 3, 5)
    with pytest.raises(ValueError, match="LSTM: expected h_0 of shape"):
        layer(x, (st.zeros(1, 2, 6), st.zeros(1, 3, 6)))
