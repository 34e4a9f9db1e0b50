"""Import of ONNX LSTM/GRU/RNN, Attention and RotaryEmbedding beyond the conformance cases.

Checks the variants the suite leaves out (sequence_lens with reverse and layout=1, clip,
input_forget, non-default activations with alpha/beta), gradients reaching the weights, and
every error path of `onnx/ops_rnn.py`.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402

F, D, I32 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32
RNG = np.random.default_rng(0)


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def one_node(op, inputs, n_out, attrs, elem=F, inits=()):
    outs = ["y", "y_h", "y_c"][:n_out]
    node = helper.make_node(op, [n for n, _ in inputs], outs, **attrs)
    g = helper.make_graph([node], "g", [vi(n, e) for n, e in inputs],
                          [vi(o, elem) for o in outs], list(inits))
    return st.onnx.load(helper.make_model(g))


def run(m, *arrays):
    with st.no_grad():
        out = m(*[st.tensor(a) for a in arrays])
    return [to_numpy(o) for o in (out if isinstance(out, tuple) else (out,))]


# ---- numpy references (time-major, one direction) ----------------------------------------------


def lstm_ref(x, w, r, b, lens, reverse, clip, input_forget):
    steps, batch, _ = x.shape
    hidden = r.shape[-1]
    h = np.zeros((batch, hidden))
    c = np.zeros((batch, hidden))
    ys = np.zeros((steps, batch, hidden))
    for bi in range(batch):
        hb, cb = h[bi], c[bi]
        order = range(lens[bi] - 1, -1, -1) if reverse else range(lens[bi])
        for t in order:
            g = x[t, bi] @ w.T + hb @ r.T + b[:4 * hidden] + b[4 * hidden:]
            g = np.clip(g, -clip, clip)
            i, o, f, cand = np.split(g, 4)
            i = sigmoid(i)
            f = 1 - i if input_forget else sigmoid(f)
            cb = f * cb + i * np.tanh(cand)
            hb = sigmoid(o) * np.tanh(cb)
            ys[t, bi] = hb
        h[bi], c[bi] = hb, cb
    return ys, h, c


def test_lstm_sequence_lens_reverse_layout_clip_input_forget():
    steps, batch, n_in, hidden = 4, 3, 2, 3
    x = RNG.standard_normal((steps, batch, n_in))
    w = RNG.standard_normal((1, 4 * hidden, n_in))
    r = RNG.standard_normal((1, 4 * hidden, hidden))
    b = RNG.standard_normal((1, 8 * hidden))
    lens = np.array([4, 2, 0], np.int32)
    m = one_node("LSTM", [("x", D), ("w", D), ("r", D), ("b", D), ("lens", I32)], 3,
                 {"hidden_size": hidden, "direction": "reverse", "layout": 1, "clip": 0.7,
                  "input_forget": 1}, D)
    y, y_h, y_c = run(m, x.transpose(1, 0, 2), w, r, b, lens)
    # ONNX float attributes are float32
    ys, h, c = lstm_ref(x, w[0], r[0], b[0], lens, True, float(np.float32(0.7)), True)
    np.testing.assert_allclose(y, ys.transpose(1, 0, 2)[:, :, None], rtol=1e-10)
    np.testing.assert_allclose(y_h, h[:, None], rtol=1e-10)
    np.testing.assert_allclose(y_c, c[:, None], rtol=1e-10)


def test_gru_activations_with_alpha_beta():
    steps, batch, n_in, hidden = 3, 2, 2, 2
    x = RNG.standard_normal((steps, batch, n_in))
    w = RNG.standard_normal((1, 3 * hidden, n_in))
    r = RNG.standard_normal((1, 3 * hidden, hidden))
    m = one_node("GRU", [("x", D), ("w", D), ("r", D)], 2,
                 {"hidden_size": hidden, "activations": ["HardSigmoid", "LeakyRelu"],
                  "activation_alpha": [0.3, 0.1], "activation_beta": [0.4]}, D)
    y, y_h = run(m, x, w, r)
    a, be, lk = (float(np.float32(v)) for v in (0.3, 0.4, 0.1))  # float32 attributes
    h = np.zeros((batch, hidden))
    for t in range(steps):
        gx = x[t] @ w[0].T
        z = np.clip(a * (gx[:, :hidden] + h @ r[0, :hidden].T) + be, 0, 1)
        rr = np.clip(a * (gx[:, hidden:2 * hidden] + h @ r[0, hidden:2 * hidden].T) + be, 0, 1)
        pre = gx[:, 2 * hidden:] + (rr * h) @ r[0, 2 * hidden:].T
        cand = np.where(pre >= 0, pre, lk * pre)
        h = (1 - z) * cand + z * h
    np.testing.assert_allclose(y_h[0], h, rtol=1e-10)
    np.testing.assert_allclose(y[-1, 0], h, rtol=1e-10)


def test_rnn_gradient_reaches_weights():
    hidden, n_in = 2, 3
    w0 = RNG.standard_normal((1, hidden, n_in))
    r0 = RNG.standard_normal((1, hidden, hidden)) * 0.5
    x = RNG.standard_normal((3, 1, n_in))
    inits = [numpy_helper.from_array(w0, "w"), numpy_helper.from_array(r0, "r")]
    node = helper.make_node("RNN", ["x", "w", "r"], ["", "y_h"], hidden_size=hidden)
    g = helper.make_graph([node], "g", [vi("x", D)], [vi("y_h", D)], inits)
    m = st.onnx.load(helper.make_model(g))
    m(st.tensor(x)).sum().backward()

    def loss(w, r):
        h = np.zeros((1, hidden))
        for t in range(3):
            h = np.tanh(x[t] @ w[0].T + h @ r[0].T)
        return h.sum()

    eps = 1e-6
    for name, base in (("w", w0), ("r", r0)):
        fd = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            d = np.zeros_like(base)
            d[idx] = eps
            args_p = {"w": w0, "r": r0}
            args_m = dict(args_p)
            args_p[name], args_m[name] = base + d, base - d
            fd[idx] = (loss(**args_p) - loss(**args_m)) / (2 * eps)
        np.testing.assert_allclose(to_numpy(getattr(m, name).grad), fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("attrs, shapes, match", [
    ({"direction": "sideways"}, None, r"direction 'sideways' does not match 1 weight"),
    ({"hidden_size": 5}, None, r"hidden_size=5 but R has shape"),
    ({"activations": ["Swish"]}, None, r"activation 'Swish' is not supported"),
    ({"activations": ["Tanh", "Tanh"]}, None, r"expected 1 activations"),
    ({}, {"w": (1, 2, 4)}, r"W has shape \(1, 2, 4\), expected \(1, 2, 3\)"),
    ({}, {"r": (1, 4, 2)}, r"R has shape \(1, 4, 2\), expected"),
    ({}, {"x": (2, 3)}, r"X, W and R must be 3-D"),
])
def test_rnn_bad_inputs(attrs, shapes, match):
    shapes = {"x": (2, 1, 3), "w": (1, 2, 3), "r": (1, 2, 2), **(shapes or {})}
    m = one_node("RNN", [("x", F), ("w", F), ("r", F)], 2, {"hidden_size": 2, **attrs})
    arrays = [np.ones(shapes[k], np.float32) for k in ("x", "w", "r")]
    with pytest.raises(OnnxImportError, match=r"\(RNN\): .*" + match):
        run(m, *arrays)


def test_rnn_sequence_lens_out_of_range():
    m = one_node("RNN", [("x", F), ("w", F), ("r", F), ("b", F), ("lens", I32)], 2,
                 {"hidden_size": 2})
    arrays = [np.ones(s, np.float32) for s in ((2, 1, 3), (1, 2, 3), (1, 2, 2), (1, 4))]
    with pytest.raises(OnnxImportError, match=r"sequence_lens \[5\] does not fit batch 1"):
        run(m, *arrays, np.array([5], np.int32))


# ---- Attention and RotaryEmbedding -------------------------------------------------------------


def attention(inputs, attrs, n_out=1, elem=F):
    outs = ["y", "pk", "pv", "qk"][:n_out]
    node = helper.make_node("Attention", [n for n, _ in inputs], outs, **attrs)
    g = helper.make_graph([node], "g", [vi(n, e) for n, e in inputs],
                          [vi(o, elem) for o in outs])
    return st.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))


def test_attention_gqa_causal_past_matches_numpy():
    q = RNG.standard_normal((1, 4, 2, 3))
    k = RNG.standard_normal((1, 2, 2, 3))
    v = RNG.standard_normal((1, 2, 2, 3))
    pk = RNG.standard_normal((1, 2, 1, 3))
    pv = RNG.standard_normal((1, 2, 1, 3))
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"],
                            ["y", "ok", "ov", "qk"], is_causal=1, softcap=2.0,
                            qk_matmul_output_mode=3)
    g = helper.make_graph([node], "g", [vi(n, D) for n in ("q", "k", "v", "pk", "pv")],
                          [vi(o, D) for o in ("y", "ok", "ov", "qk")])
    m = st.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))
    y, ok, ov, probs = run(m, q, k, v, pk, pv)
    kk = np.repeat(np.concatenate([pk, k], 2), 2, axis=1)
    vv = np.repeat(np.concatenate([pv, v], 2), 2, axis=1)
    s = np.tanh(q @ kk.transpose(0, 1, 3, 2) / np.sqrt(3) / 2.0) * 2.0
    s = s + np.where(np.arange(3)[None] <= np.arange(2)[:, None] + 1, 0.0, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(probs, p, rtol=1e-10)
    np.testing.assert_allclose(y, p @ vv, rtol=1e-10)
    np.testing.assert_allclose(ok, np.concatenate([pk, k], 2))


def test_attention_gradient_and_fully_masked_rows():
    q = st.tensor(RNG.standard_normal((1, 1, 2, 2)), requires_grad=True)
    k = st.tensor(RNG.standard_normal((1, 1, 2, 2)))
    v = st.tensor(RNG.standard_normal((1, 1, 2, 2)))
    mask = st.tensor(np.array([[True, True], [False, False]]))
    m = attention([("q", D), ("k", D), ("v", D), ("mask", TensorProto.BOOL)], {}, 1, D)
    y = m(q, k, v, mask)
    assert np.all(to_numpy(y)[0, 0, 1] == 0)  # a row with every key masked is zero
    y.sum().backward()
    g = to_numpy(q.grad)
    assert np.all(np.isfinite(g)) and np.all(g[0, 0, 1] == 0) and np.any(g[0, 0, 0] != 0)


@pytest.mark.parametrize("shapes, attrs, match", [
    (((1, 2, 4), (1, 2, 4), (1, 2, 4)), {"q_num_heads": 3, "kv_num_heads": 1},
     r"needs q_num_heads/kv_num_heads dividing"),
    (((1, 1, 2, 4), (1, 2, 4), (1, 2, 4)), {}, r"must all be 3-D or all 4-D"),
    (((1, 3, 2, 4), (1, 2, 2, 4), (1, 2, 2, 4)), {},
     r"3 query heads are not a multiple of 2 kv heads"),
    (((1, 1, 2, 4), (1, 1, 2, 3), (1, 1, 2, 4)), {}, r"do not match Q"),
])
def test_attention_bad_inputs(shapes, attrs, match):
    m = attention([("q", F), ("k", F), ("v", F)], attrs)
    arrays = [np.ones(s, np.float32) for s in shapes]
    with pytest.raises(OnnxImportError, match=r"\(Attention\): .*" + match):
        run(m, *arrays)


def test_attention_past_key_without_value():
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk"], ["y"])
    g = helper.make_graph([node], "g", [vi(n) for n in ("q", "k", "v", "pk")], [vi("y")])
    m = st.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))
    with pytest.raises(OnnxImportError, match=r"past_key and past_value must be given together"):
        run(m, *[np.ones((1, 1, 2, 2), np.float32)] * 4)


def test_rotary_embedding_bad_dim():
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], rotary_embedding_dim=3)
    g = helper.make_graph([node], "g", [vi(n) for n in ("x", "c", "s")], [vi("y")])
    m = st.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))
    arrays = [np.ones(s, np.float32) for s in ((1, 1, 2, 4), (1, 2, 2), (1, 2, 2))]
    with pytest.raises(OnnxImportError, match=r"rotary_embedding_dim 3 must be even"):
        run(m, *arrays)


# ---- the fused-cell route agrees with the general one --------------------------------------------


def _fused_vs_general(monkeypatch, op, n_gates, attrs, names, lens=None, layout=0, fused=True):
    """Run one LSTM/GRU node through both routes: outputs and input gradients must agree."""
    from singa_tensor.onnx import ops_rnn

    steps, batch, n_in, hidden = 5, 3, 4, 3
    n_dir = 2 if attrs.get("direction") == "bidirectional" else 1
    shapes = {"x": (steps, batch, n_in), "w": (n_dir, n_gates * hidden, n_in),
              "r": (n_dir, n_gates * hidden, hidden), "b": (n_dir, 2 * n_gates * hidden),
              "h0": (n_dir, batch, hidden), "c0": (n_dir, batch, hidden)}
    if layout:
        shapes.update(x=(batch, steps, n_in), h0=(batch, n_dir, hidden),
                      c0=(batch, n_dir, hidden))
    arrays = {k: RNG.standard_normal(s) * 0.7 for k, s in shapes.items()}
    inputs = [(k, D) for k in ("x", "w", "r") if k in names] + [
        (k, D) for k in ("b", "h0", "c0") if k in names]
    present = set(names) | ({"lens"} if lens is not None else set())
    order = ["x", "w", "r", "b", "lens", "h0", "c0"]  # ONNX's input order
    last = max(i for i, k in enumerate(order) if k in present)
    node_in = [k if k in present else "" for k in order[:last + 1]]
    n_out = 3 if op == "LSTM" else 2
    outs = ["y", "y_h", "y_c"][:n_out]
    node = helper.make_node(op, node_in, outs, hidden_size=hidden, layout=layout, **attrs)
    graph_in = [vi(k, D) for k, _ in inputs] + ([vi("lens", I32)] if lens is not None else [])
    g = helper.make_graph([node], "g", graph_in, [vi(o, D) for o in outs])
    m = st.onnx.load(helper.make_model(g))
    ups = None
    calls = []
    real = ops_rnn._fast_direction

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    results = []
    for route in ("fused", "general"):
        if route == "general":
            monkeypatch.setattr(ops_rnn, "_fast_ok", lambda *a: False)
        else:
            monkeypatch.setattr(ops_rnn, "_fast_direction", spy)
        ts = [st.tensor(arrays[k], requires_grad=True) for k, _ in inputs]
        feed = ts + ([st.tensor(lens)] if lens is not None else [])
        out = m(*feed)
        if ups is None:
            ups = [RNG.standard_normal(o.shape) for o in out]
        sum(((o * st.tensor(u)).sum() for o, u in zip(out, ups)), st.tensor(0.0)).backward()
        results.append(([to_numpy(o) for o in out], [to_numpy(t.grad) for t in ts]))
        if route == "fused":
            assert bool(calls) == fused
    (vals_a, grads_a), (vals_b, grads_b) = results
    for a, b in zip(vals_a + grads_a, vals_b + grads_b):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("attrs, names, layout", [
    ({}, ("x", "w", "r"), 0),
    ({"direction": "bidirectional"}, ("x", "w", "r", "b", "h0", "c0"), 0),
    ({"direction": "reverse", "activations": ["sigmoid", "TANH", "Tanh"]},
     ("x", "w", "r", "b", "c0"), 1),
])
def test_lstm_fused_route_matches_general(monkeypatch, attrs, names, layout):
    _fused_vs_general(monkeypatch, "LSTM", 4, attrs, names, layout=layout)


@pytest.mark.parametrize("attrs, names, layout", [
    ({}, ("x", "w", "r", "b"), 0),
    ({"direction": "bidirectional"}, ("x", "w", "r", "b", "h0"), 1),
    ({"direction": "reverse"}, ("x", "w", "r", "h0"), 0),
])
def test_gru_fused_route_matches_general(monkeypatch, attrs, names, layout):
    _fused_vs_general(monkeypatch, "GRU", 3, dict(attrs, linear_before_reset=1), names,
                      layout=layout)


def test_full_sequence_lens_take_the_fused_route(monkeypatch):
    _fused_vs_general(monkeypatch, "LSTM", 4, {}, ("x", "w", "r", "b"),
                      lens=np.full(3, 5, np.int32))


@pytest.mark.parametrize("op, n_gates, attrs, lens", [
    ("LSTM", 4, {}, np.array([5, 2, 4], np.int32)),  # ragged lengths
    ("LSTM", 4, {"clip": 2.0}, None),
    ("LSTM", 4, {"input_forget": 1}, None),
    ("LSTM", 4, {"activations": ["Sigmoid", "Tanh", "Relu"]}, None),
    ("GRU", 3, {}, None),  # linear_before_reset=0
])
def test_other_variants_keep_the_general_route(monkeypatch, op, n_gates, attrs, lens):
    _fused_vs_general(monkeypatch, op, n_gates, attrs, ("x", "w", "r", "b"), lens=lens,
                      fused=False)
