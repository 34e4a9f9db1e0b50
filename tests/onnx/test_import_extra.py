"""Import of the signal, detection, training and small integer ops in `onnx/ops_extra.py`.

Complements the conformance suite: gradients through DFT, STFT and SwiGLU against finite
differences, forms the suite does not exercise (dft_length padding, complex irfft, per-row zero
points, old-opset PRelu) and every error path of the handlers.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402

F, D, I64, I32 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=21, extra=()):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra]
    return helper.make_model(g, opset_imports=ops)


def run1(node, inputs, elem_in=F, elem_out=F, opset=21, extra=()):
    """Run a one-node model on numpy inputs, returning the first output as numpy."""
    names = [n for n in node.input if n]
    ins = [vi(n, elem_in if isinstance(elem_in, int) else elem_in[i]) for i, n in enumerate(names)]
    m = model([node], ins, [vi(o, elem_out) for o in node.output], opset, extra)
    return run(m, inputs)[0]


def run(m, inputs):
    """Outputs of model m on numpy inputs, typed as the graph declares."""
    return st.onnx.load(m).run_numpy(list(inputs))


def fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def grad_of(m, x, w):
    """d sum(w * m(x)) / dx through the imported model."""
    xt = st.tensor(x, requires_grad=True)
    (m(xt) * st.tensor(w)).sum().backward()
    return to_numpy(xt.grad)


# ---- PRelu ---------------------------------------------------------------------------------------


def test_prelu_opset6_slope_is_per_channel():
    node = helper.make_node("PRelu", ["x", "s"], ["y"])
    x = -np.ones((2, 3, 4), np.float32)
    s = np.array([0.1, 0.2, 0.3], np.float32)
    y = run1(node, [x, s], opset=6)
    np.testing.assert_allclose(y, -s.reshape(3, 1) * np.ones((2, 3, 4)), rtol=1e-6)


def test_prelu_opset9_slope_broadcasts_from_the_right():
    node = helper.make_node("PRelu", ["x", "s"], ["y"])
    x = -np.ones((2, 3, 3), np.float32)
    s = np.array([0.1, 0.2, 0.3], np.float32)
    np.testing.assert_allclose(run1(node, [x, s], opset=9), -s * np.ones((2, 3, 3)), rtol=1e-6)


# ---- windows and mel matrix ----------------------------------------------------------------------


@pytest.mark.parametrize("op,ref", [("HannWindow", np.hanning), ("HammingWindow", None),
                                    ("BlackmanWindow", np.blackman)])
def test_symmetric_windows_double(op, ref):
    node = helper.make_node(op, ["n"], ["y"], periodic=0, output_datatype=D)
    y = run1(node, [np.array(7, np.int64)], I64, D)
    assert y.dtype == np.float64
    n = np.arange(7)
    want = ref(7) if ref else 25 / 46 - 21 / 46 * np.cos(2 * np.pi * n / 6)
    np.testing.assert_allclose(y, want, atol=1e-12)


def test_window_of_one_point_is_one():
    node = helper.make_node("HannWindow", ["n"], ["y"], periodic=0)
    assert run1(node, [np.array(1, np.int64)], I64).tolist() == [1.0]


def test_window_size_errors():
    node = helper.make_node("HannWindow", ["n"], ["y"])
    with pytest.raises(OnnxImportError, match=r"\(HannWindow\): size must be non-negative"):
        run1(node, [np.array(-2, np.int64)], I64)
    with pytest.raises(OnnxImportError, match=r"size must have one element, got shape \(2,\)"):
        run1(node, [np.array([2, 3], np.int64)], I64)


def test_window_output_type_we_cannot_hold():
    node = helper.make_node("HannWindow", ["n"], ["y"], output_datatype=TensorProto.STRING)
    with pytest.raises(OnnxImportError, match=r"\(HannWindow\): element type STRING"):
        run1(node, [np.array(4, np.int64)], I64)


def test_mel_weight_matrix_rejects_bad_sizes_and_edges():
    node = helper.make_node("MelWeightMatrix", ["m", "n", "r", "lo", "hi"], ["y"])
    types = [I64, I64, I64, F, F]
    i = np.int64
    with pytest.raises(OnnxImportError, match=r"\(MelWeightMatrix\): .* must be positive"):
        run1(node, [i(0), i(16), i(8000), np.float32(0), np.float32(4000)], types)
    with pytest.raises(OnnxImportError, match=r"fall outside the 9 spectrogram bins"):
        run1(node, [i(4), i(16), i(8000), np.float32(0), np.float32(16000)], types)


# ---- DFT and STFT --------------------------------------------------------------------------------


def _dft_model(opset=20, n=None, **attrs):
    ins = ["x", "n" if n is not None else "", "axis"] if opset >= 20 else ["x"]
    if opset < 20 and n is not None:
        ins = ["x", "n"]
    node = helper.make_node("DFT", ins, ["y"], **attrs)
    inputs = [vi("x", D)] + ([vi("n", I64)] if n is not None else [])
    if opset >= 20:
        inputs.append(vi("axis", I64))
    return model([node], inputs, [vi("y", D)], opset)


def _cplx(z):
    return np.stack([z.real, z.imag], -1)


def test_dft_padding_and_cropping_with_dft_length():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3, 1))
    for n in (8, 3):
        m = _dft_model(n=n)
        y = run(m, [x, np.array(n), np.array(1)])[0]
        np.testing.assert_allclose(y, _cplx(np.fft.fft(x[..., 0], n=n, axis=1)), atol=1e-12)


def test_dft_complex_inverse_onesided_is_irfft_of_odd_length():
    rng = np.random.default_rng(1)
    z = rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))
    m = _dft_model(n=7, inverse=1, onesided=1)
    y = run(m, [_cplx(z), np.array(7), np.array(0)])[0]
    np.testing.assert_allclose(y[..., 0], np.fft.irfft(z, n=7, axis=0), atol=1e-12)


def test_dft_opset17_axis_attribute_and_real_onesided():
    x = np.arange(12.0).reshape(1, 6, 2, 1)
    y = run(_dft_model(opset=17, axis=1, onesided=1), [x])[0]
    np.testing.assert_allclose(y, _cplx(np.fft.rfft(x[..., 0], axis=1)), atol=1e-12)


def test_dft_gradient_wrt_signal_matches_finite_differences():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 2))  # complex signal along dim 1
    w = rng.standard_normal((2, 3, 2))
    m = st.onnx.load(_dft_model(opset=19, axis=1, onesided=1))

    def f(a):
        return float((_cplx(np.fft.fft(a[..., 0] + 1j * a[..., 1], axis=1))[:, :3] * w).sum())

    np.testing.assert_allclose(grad_of(m, x, w), fd_grad(f, x), rtol=1e-6, atol=1e-8)


def test_dft_inverse_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 2))
    w = rng.standard_normal((6, 3, 1))
    m = st.onnx.load(_dft_model(opset=19, axis=0, inverse=1, onesided=1))

    def f(a):
        return float((np.fft.irfft(a[..., 0] + 1j * a[..., 1], n=6, axis=0)[..., None] * w).sum())

    np.testing.assert_allclose(grad_of(m, x, w), fd_grad(f, x), rtol=1e-6, atol=1e-8)


def test_dft_errors():
    x = np.zeros((2, 3, 1))
    with pytest.raises(OnnxImportError, match=r"\(DFT\): axis 2 is out of range for a rank-3"):
        run(_dft_model(), [x, np.array(2)])
    with pytest.raises(OnnxImportError, match=r"input must end in a dim of 1 \(real\) or 2"):
        run(_dft_model(), [np.zeros((2, 3)), np.array(0)])
    with pytest.raises(OnnxImportError, match=r"dft_length must be positive, got 0"):
        run(_dft_model(n=0), [x, np.array(0), np.array(1)])
    with pytest.raises(OnnxImportError, match=r"from opset 20 the axis is an input"):
        run(_dft_model(axis=1), [x, np.array(1)])
    node = helper.make_node("DFT", ["x", "", "a"], ["y"])
    m = model([node], [vi("x", D), vi("a", I64)], [vi("y", D)], 19)
    with pytest.raises(OnnxImportError, match=r"before opset 20 the axis is an attribute"):
        run(m, [x, np.array(1)])


def _stft_model(window=True, length=True, **attrs):
    ins = ["x", "step", "w" if window else "", "len" if length else ""]
    node = helper.make_node("STFT", ins, ["y"], **attrs)
    inputs = [vi("x", D), vi("step", I64)] + ([vi("w", D)] if window else []) + \
        ([vi("len", I64)] if length else [])
    return model([node], inputs, [vi("y", D)], 17)


def test_stft_complex_two_sided_with_window():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 20, 2))
    win = np.hanning(8)
    y = run(_stft_model(onesided=0), [x, np.array(4), win, np.array(8)])[0]
    z = x[..., 0] + 1j * x[..., 1]
    want = np.stack([np.fft.fft(z[:, s:s + 8] * win, axis=1) for s in range(0, 13, 4)], 1)
    np.testing.assert_allclose(y, _cplx(want), atol=1e-12)


def test_stft_gradient_wrt_signal_and_window():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 12, 1))
    win = rng.standard_normal(4)
    w = rng.standard_normal((1, 5, 3, 2))
    m = st.onnx.load(_stft_model(length=False))
    xt, wt = st.tensor(x, requires_grad=True), st.tensor(win, requires_grad=True)
    (m(xt, st.tensor(np.array(2)), wt) * st.tensor(w)).sum().backward()

    def f(a, b):
        z = np.stack([np.fft.rfft(a[0, s:s + 4, 0] * b) for s in range(0, 9, 2)], 0)
        return float((_cplx(z)[None] * w).sum())

    np.testing.assert_allclose(to_numpy(xt.grad), fd_grad(lambda a: f(a, win), x), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(to_numpy(wt.grad), fd_grad(lambda b: f(x, b), win), rtol=1e-6,
                               atol=1e-8)


def test_stft_errors():
    m = _stft_model(window=False)
    with pytest.raises(OnnxImportError, match=r"\(STFT\): signal must be \[batch, length, 1 or 2"):
        run(m, [np.zeros((2, 8)), np.array(2), np.array(4)])
    with pytest.raises(OnnxImportError, match=r"frame_length 9 must .* <= signal length 8"):
        run(m, [np.zeros((1, 8, 1)), np.array(2), np.array(9)])
    with pytest.raises(OnnxImportError, match=r"window must be 1-D, got shape \(2, 2\)"):
        run(_stft_model(length=False), [np.zeros((1, 8, 1)), np.array(2), np.zeros((2, 2))])


# ---- SwiGLU --------------------------------------------------------------------------------------


def test_swiglu_gradient_matches_finite_differences():
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=0.7)
    m = st.onnx.load(model([node], [vi("a", D), vi("b", D)], [vi("y", D)], 28))
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    at = st.tensor(a, requires_grad=True)
    m(at, st.tensor(b)).sum().backward()

    def f(v):
        return float((v / (1 + np.exp(-0.7 * v)) * b).sum())

    np.testing.assert_allclose(to_numpy(at.grad), fd_grad(f, a), rtol=1e-6)


def test_swiglu_rejects_broadcasting():
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"])
    with pytest.raises(OnnxImportError, match=r"\(SwiGLU\): A and B must have the same shape"):
        run1(node, [np.ones((2, 3), np.float32), np.ones((3,), np.float32)], opset=28)


def test_swiglu_rejects_mixed_types():
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"])
    with pytest.raises(OnnxImportError, match=r"A and B must have the same type"):
        run1(node, [np.ones(2, np.float32), np.ones(2)], [F, D], opset=28)


# ---- NonMaxSuppression ---------------------------------------------------------------------------


def _nms(center=0):
    node = helper.make_node("NonMaxSuppression", ["b", "s", "k", "iou", "thr"], ["y"],
                            center_point_box=center)
    return model([node], [vi("b"), vi("s"), vi("k", I64), vi("iou"), vi("thr")],
                 [vi("y", I64)], 11)


def test_nms_ties_keep_lower_index_and_threshold_is_strict():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]]], np.float32)
    scores = np.array([[[0.5, 0.5, 0.3, 0.2]]], np.float32)
    y = run(_nms(), [boxes, scores, np.array([5]), np.array([0.5], np.float32),
                                     np.array([0.2], np.float32)])[0]
    assert y.dtype == np.int64
    assert y.tolist() == [[0, 0, 0], [0, 0, 2]]


def test_nms_without_limit_selects_nothing():
    node = helper.make_node("NonMaxSuppression", ["b", "s"], ["y"])
    m = model([node], [vi("b"), vi("s")], [vi("y", I64)], 11)
    y = run(m, [np.zeros((1, 2, 4), np.float32), np.ones((1, 1, 2), np.float32)])
    assert y[0].shape == (0, 3)


def test_nms_errors():
    args = [np.array([5]), np.array([0.5], np.float32), np.array([0.0], np.float32)]
    with pytest.raises(OnnxImportError, match=r"\(NonMaxSuppression\): boxes must be \[batch"):
        run(_nms(), [np.zeros((1, 2, 3), np.float32),
                                     np.zeros((1, 1, 2), np.float32)] + args)
    with pytest.raises(OnnxImportError, match=r"center_point_box must be 0 or 1, got 2"):
        run(_nms(2), [np.zeros((1, 2, 4), np.float32),
                                      np.zeros((1, 1, 2), np.float32)] + args)


# ---- training ops --------------------------------------------------------------------------------

TRAIN = [("ai.onnx.preview.training", 1)]


def _train_node(op, n_in, n_out, **attrs):
    ins = ["r", "t"] + [f"i{k}" for k in range(n_in)]
    return helper.make_node(op, ins, [f"o{k}" for k in range(n_out)],
                            domain="ai.onnx.preview.training", **attrs)


def _train_run(node, arrays):
    ins = [vi("r"), vi("t", I64)] + [vi(n) for n in node.input[2:]]
    m = model([node], ins, [vi(o) for o in node.output], 21, TRAIN)
    return run(m, [np.float32(0.1), np.int64(3)] + arrays)


def test_momentum_nesterov_later_step():
    x, g, v = (np.array([1.0, 2.0], np.float32) * k for k in (1, 0.5, 0.25))
    node = _train_node("Momentum", 3, 2, alpha=0.9, beta=0.5, mode="nesterov",
                       norm_coefficient=0.01)
    xn, vn = _train_run(node, [x, g, v])
    gr = g + 0.01 * x
    v_want = 0.9 * v + 0.5 * gr
    np.testing.assert_allclose(vn, v_want, rtol=1e-6)
    np.testing.assert_allclose(xn, x - 0.1 * (gr + 0.9 * v_want), rtol=1e-6)


def test_training_op_errors():
    a = np.ones(2, np.float32)
    with pytest.raises(OnnxImportError, match=r"\(Adam\): expected R, T and 4 groups"):
        _train_run(_train_node("Adam", 3, 3), [a, a, a])
    with pytest.raises(OnnxImportError, match=r"tensor group 1 entry 0 has shape \(3,\)"):
        _train_run(_train_node("Adagrad", 3, 2), [a, np.ones(3, np.float32), a])
    with pytest.raises(OnnxImportError, match=r"\(Momentum\): attributes \['mode'\] are required"):
        _train_run(_train_node("Momentum", 3, 2, alpha=0.9, beta=0.1, norm_coefficient=0.0),
                   [a, a, a])
    bad = _train_node("Momentum", 3, 2, alpha=0.9, beta=0.1, norm_coefficient=0.0, mode="x")
    with pytest.raises(OnnxImportError, match=r"mode must be 'standard' or 'nesterov'"):
        _train_run(bad, [a, a, a])


# ---- MatMulInteger, BitCast, TfIdfVectorizer -----------------------------------------------------


def test_matmul_integer_per_row_and_per_column_zero_points():
    a = np.array([[1, 2, 3], [4, 5, 6]], np.uint8)
    b = np.array([[1, 2], [3, 4], [5, 6]], np.int8)
    za, zb = np.array([1, 2], np.uint8), np.array([1, -1], np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    types = [TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT8]
    y = run1(node, [a, b, za, zb], types, I32)
    want = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb)
    assert y.dtype == np.int32 and y.tolist() == want.tolist()


def test_matmul_integer_errors():
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
    with pytest.raises(OnnxImportError, match=r"\(MatMulInteger\): shapes \(2, 3\) and \(2, 2\)"):
        run1(node, [np.ones((2, 3), np.int32), np.ones((2, 2), np.int32)], I32, I32)
    with pytest.raises(OnnxImportError, match=r"A and B must be integer tensors"):
        run1(node, [np.ones((2, 2), np.float32), np.ones((2, 2), np.int32)], [F, I32], I32)


def test_bitcast_float16_round_trip_and_width_error():
    x = np.array([1.0, -2.5], np.float16)
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT16)
    y = run1(node, [x], TensorProto.FLOAT16, TensorProto.INT16, opset=26)
    assert y.tolist() == x.view(np.int16).tolist()
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64)
    with pytest.raises(OnnxImportError, match=r"\(BitCast\): .*32 bits\) cannot be bit-cast"):
        run1(node, [np.ones(2, np.float32)], F, I64, opset=26)
    node = helper.make_node("BitCast", ["x"], ["y"])
    with pytest.raises(OnnxImportError, match=r"attribute 'to' is required"):
        run1(node, [np.ones(2, np.float32)], opset=26)


def _tfidf(mode="TFIDF", **kw):
    attrs = dict(mode=mode, min_gram_length=1, max_gram_length=2, max_skip_count=1,
                 ngram_counts=[0, 2], ngram_indexes=[0, 1, 2], pool_int64s=[7, 8, 7, 8])
    attrs.update(kw)
    return helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)


def test_tfidf_counts_skipped_bigrams_and_weights():
    x = np.array([[7, 8, 7, 9, 8], [8, 8, 8, 8, 8]], np.int64)
    y = run1(_tfidf(weights=[1.0, 2.0, 10.0]), [x], I64)
    # row 0: unigrams 7 and 8 twice each; bigram (7, 8) once adjacent and once one apart
    np.testing.assert_array_equal(y, [[2.0, 4.0, 20.0], [0.0, 10.0, 0.0]])
    y = run1(_tfidf("IDF"), [x[0]], I64)
    np.testing.assert_array_equal(y, [1.0, 1.0, 1.0])


def test_tfidf_errors():
    with pytest.raises(OnnxImportError, match=r"\(TfIdfVectorizer\): mode must be TF, IDF"):
        run1(_tfidf("BM25"), [np.array([7], np.int64)], I64)
    with pytest.raises(OnnxImportError, match=r"need 1 <= min_gram_length <= max_gram_length"):
        run1(_tfidf(min_gram_length=3), [np.array([7], np.int64)], I64)
    with pytest.raises(OnnxImportError, match=r"ngram_indexes has 2 entries"):
        run1(_tfidf(ngram_indexes=[0, 1]), [np.array([7], np.int64)], I64)
    with pytest.raises(OnnxImportError, match=r"input must hold integer tokens"):
        run1(_tfidf(), [np.array([7.0], np.float32)])
    bad = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF")
    with pytest.raises(OnnxImportError, match=r"attributes \['min_gram_length'"):
        run1(bad, [np.array([7], np.int64)], I64)


# ---- ai.onnx.ml ----------------------------------------------------------------------------------

ML = [("ai.onnx.ml", 3)]


def test_array_feature_extractor_gradient_and_range_error():
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    m = st.onnx.load(model([node], [vi("x", D), vi("i", I64)], [vi("y", D)], 21, ML))
    xt = st.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = m(xt, st.tensor(np.array([2, 0, 2])))
    assert y.tolist() == [[2.0, 0.0, 2.0], [5.0, 3.0, 5.0]]
    y.sum().backward()
    assert xt.grad.tolist() == [[1.0, 0.0, 2.0]] * 2
    with pytest.raises(OnnxImportError, match=r"index 3 is out of range for a last dim of size 3"):
        m(xt, st.tensor(np.array([3])))


def test_binarizer_threshold():
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    m = model([node], [vi("x")], [vi("y")], 21, ML)
    y = run(m, [np.array([0.2, 0.5, 0.9], np.float32)])[0]
    assert y.tolist() == [0.0, 0.0, 1.0]


# ---- LinearAttention -----------------------------------------------------------------------------


def _la_model(rule="gated_delta", **attrs):
    attrs.setdefault("update_rule", rule)
    ins = ["q", "k", "v", "", "decay" if "gated" in rule else "",
           "beta" if "delta" in rule else ""]
    node = helper.make_node("LinearAttention", ins, ["o", "s"], **attrs)
    inputs = [vi(n, D) for n in ins if n]
    return model([node], inputs, [vi("o", D), vi("s", D)], 27)


def _la_ref(q, k, v, decay, beta, hq, hkv):
    b, t, _ = q.shape
    dk, dv = q.shape[-1] // hq, v.shape[-1] // hkv
    q4, k4 = q.reshape(b, t, hq, dk), k.reshape(b, t, hkv, dk)
    v4 = v.reshape(b, t, hkv, dv)
    s = np.zeros((b, hkv, dk, dv))
    out = np.zeros((b, t, hq, dv))
    for i in range(t):
        s = s * np.exp(decay[:, i])[:, :, None, None]
        vt = beta[:, i][:, :, None] * (v4[:, i] - np.einsum("bhdm,bhd->bhm", s, k4[:, i]))
        s = s + k4[:, i][..., None] * vt[:, :, None, :]
        out[:, i] = np.einsum("bhd,bhdm->bhm", q4[:, i], np.repeat(s, hq // hkv, 1)) / np.sqrt(dk)
    return out.reshape(b, t, -1), s


def test_linear_attention_gqa_gated_delta_value_and_gradient():
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((1, 3, 4 * 2)), rng.standard_normal((1, 3, 2 * 2)) * 0.5
    v = rng.standard_normal((1, 3, 2 * 3))
    decay, beta = -rng.random((1, 3, 2)), rng.random((1, 3, 2))
    m = st.onnx.load(_la_model(q_num_heads=4, kv_num_heads=2))
    kt = st.tensor(k, requires_grad=True)
    o, s = m(st.tensor(q), kt, st.tensor(v), st.tensor(decay), st.tensor(beta))
    want_o, want_s = _la_ref(q, k, v, decay, beta, 4, 2)
    np.testing.assert_allclose(to_numpy(o), want_o, atol=1e-12)
    np.testing.assert_allclose(to_numpy(s), want_s, atol=1e-12)
    o.sum().backward()
    fd = fd_grad(lambda a: _la_ref(q, a, v, decay, beta, 4, 2)[0].sum(), k)
    np.testing.assert_allclose(to_numpy(kt.grad), fd, rtol=1e-6, atol=1e-8)


def test_linear_attention_errors():
    x = np.zeros((1, 2, 4))
    with pytest.raises(OnnxImportError, match=r"\(LinearAttention\): q_num_heads \(3\) must be"):
        run(_la_model("linear", q_num_heads=3, kv_num_heads=2), [x, x, x])
    with pytest.raises(OnnxImportError, match=r"update_rule must be linear, gated"):
        run(_la_model("linear", update_rule="x", q_num_heads=2, kv_num_heads=2), [x, x, x])
    with pytest.raises(OnnxImportError, match=r"decay must be \(B, T, 2\) or \(B, T, 4\)"):
        run(_la_model("gated", q_num_heads=2, kv_num_heads=2), [x, x, x, np.zeros((1, 2, 3))])
    with pytest.raises(OnnxImportError, match=r"query, key and value must be \(B, T, heads\*D\)"):
        run(_la_model("linear", q_num_heads=2, kv_num_heads=2), [x, np.zeros((1, 3, 4)), x])
