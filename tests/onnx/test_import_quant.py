"""Import of the linear quantization ops and FlexAttention.

Complements the conformance suite: the output type taken from an attribute or a declared
output, rounding half to even, saturation, per-axis and blocked scales with a remainder block,
per-row/per-column and per-channel QLinear scales, gradients through DequantizeLinear and
FlexAttention, and every error path of `onnx/ops_quant.py` and `onnx/ops_flex.py` (those of
float8, float4, int4 and int2 values are in test_import_lowp.py).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402

F, D, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
U8, I8, U16, I16, I32 = (TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16,
                         TensorProto.INT16, TensorProto.INT32)
_NP = {F: np.float32, D: np.float64, I64: np.int64, U8: np.uint8, I8: np.int8, U16: np.uint16,
       I16: np.int16, I32: np.int32}
PREVIEW = "ai.onnx.preview"


def model(node, ins, out_type, opset=21, extra=(), value_info=()):
    """A one-node model; ins is [(name, elem_type)], the single output is 'y'."""
    nodes = list(extra) + [node]
    inputs = [helper.make_tensor_value_info(n, e, None) for n, e in ins]
    outs = [helper.make_tensor_value_info(o, out_type, None) for o in node.output]
    g = helper.make_graph(nodes, "g", inputs, outs, value_info=list(value_info))
    ops = [helper.make_opsetid("", opset), helper.make_opsetid(PREVIEW, 1)]
    return helper.make_model(g, opset_imports=ops)


def run(node, feeds, out_type, **kw):
    """feeds: [(name, elem_type, values)]; returns the outputs as numpy (declared dtypes)."""
    m = model(node, [(n, e) for n, e, _ in feeds], out_type, **kw)
    return st.onnx.load(m).run_numpy([np.asarray(v, _NP[e]) for _, e, v in feeds])


def fails(node, feeds, out_type, match, **kw):
    with pytest.raises(OnnxImportError, match=match):
        run(node, feeds, out_type, **kw)


# ---- QuantizeLinear ------------------------------------------------------------------------------


def test_quantize_rounds_half_to_even_and_saturates_int8_from_output_dtype():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=I8)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0], np.float32)
    (y,) = run(node, [("x", F, x), ("s", F, 1.0)], I8)
    assert y.dtype == np.int8
    assert y.tolist() == [0, 2, 2, 0, -2, 127, -128]


def test_quantize_without_zero_point_defaults_to_uint8():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"])
    (y,) = run(node, [("x", F, [-3.0, 5.0, 1000.0]), ("s", F, 2.0)], U8)
    assert y.tolist() == [0, 2, 255]  # -1.5 -> -2 clamps to 0; 2.5 -> 2


def test_quantize_int16_zero_point_range_and_negative_axis():
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=-1)
    x = np.array([[1e6, -1e6, 3.0], [4.0, 10.0, -7.0]], np.float32)
    s = np.array([1.0, 2.0, 4.0], np.float32)
    z = np.array([0, 10, -5], np.int16)
    (y,) = run(node, [("x", F, x), ("s", F, s), ("z", I16, z)], I16)
    want = np.clip(np.rint(x / s) + z, -32768, 32767)
    assert y.dtype == np.int16 and y.tolist() == want.tolist()


def test_quantize_blocked_with_remainder_block():
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    x = np.arange(10, dtype=np.float32).reshape(2, 5) * 3
    s = np.array([[1.0, 2.0, 4.0], [0.5, 1.0, 8.0]], np.float32)
    z = np.array([[1, 2, 3], [4, 5, 6]], np.uint8)
    (y,) = run(node, [("x", F, x), ("s", F, s), ("z", U8, z)], U8)
    cols = np.arange(5) // 2
    want = np.clip(np.rint(x / s[:, cols]) + z[:, cols], 0, 255)
    assert y.tolist() == want.tolist()


def test_quantize_float64_input_and_uint16():
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    x = np.array([1.25, 70000.0, -3.0], np.float64)
    (y,) = run(node, [("x", D, x), ("s", D, 0.5), ("z", U16, 7)], U16)
    assert y.dtype == np.uint16 and y.tolist() == [9, 65535, 1]  # 2.5 rounds to 2


def test_quantize_errors():
    q = "QuantizeLinear"
    x, s = ("x", F, [1.0, 2.0]), ("s", F, 1.0)
    fails(helper.make_node(q, ["x", "s"], ["y"], output_dtype=I32), [x, s], I32,
          r"\(QuantizeLinear\): output element type INT32 is not a quantized type")
    fails(helper.make_node(q, ["x", "s", "z"], ["y"], output_dtype=I8),
          [x, s, ("z", U8, 0)], U8, r"output_dtype INT8 does not match y_zero_point type UINT8")
    fails(helper.make_node(q, ["x"], ["y"]), [x], U8, r"expects inputs x and y_scale")
    per = ("s", F, [1.0, 2.0, 3.0])
    fails(helper.make_node(q, ["x", "s"], ["y"], axis=0), [x, per], U8,
          r"y_scale of shape \(3,\) must be a scalar or 1-D of length 2")
    fails(helper.make_node(q, ["x", "s"], ["y"], axis=2), [x, per], U8,
          r"axis 2 is out of range for input of shape \(2,\)")
    fails(helper.make_node(q, ["x", "s"], ["y"], axis=0, block_size=-1), [x, per], U8,
          r"block_size -1 must be positive")
    fails(helper.make_node(q, ["x", "s"], ["y"], axis=0, block_size=1), [x, per], U8,
          r"y_scale of shape \(3,\) does not block input \(2,\) along axis 0 with block_size 1")


# ---- DequantizeLinear ----------------------------------------------------------------------------


def test_dequantize_blocked_and_output_dtype():
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=0, block_size=3,
                            output_dtype=D)
    x = np.array([[-128], [0], [5], [127]], np.int8)
    s = np.array([[0.5], [2.0]], np.float32)
    z = np.array([[1], [-1]], np.int8)
    (y,) = run(node, [("x", I8, x), ("s", F, s), ("z", I8, z)], D, opset=23)
    rows = np.arange(4) // 3
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, (x.astype(np.float32) - z[rows]) * s[rows])


def test_dequantize_int32_without_zero_point():
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
    (y,) = run(node, [("x", I32, [-100000, 3]), ("s", F, 0.25)], F)
    assert y.tolist() == [-25000.0, 0.75]


def test_dequantize_gradient_reaches_the_scale():
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    m = st.onnx.load(model(node, [("x", U8), ("s", D), ("z", U8)], D))
    x = st.tensor(np.array([[3, 200], [7, 9]], np.int64))
    s = st.tensor(np.array([0.5, 2.0]), requires_grad=True)
    z = st.tensor(np.array([1, 100], np.int64))
    m(x, s, z).sum().backward()
    # d(sum((x - z) * s)) / ds = column sums of (x - z)
    np.testing.assert_allclose(to_numpy(s.grad), [8.0, 9.0])


def test_dequantize_errors():
    dq = "DequantizeLinear"
    fails(helper.make_node(dq, ["x", "s", "z"], ["y"]),
          [("x", U8, [1]), ("s", F, 1.0), ("z", I8, 0)], F,
          r"\(DequantizeLinear\): x type UINT8 and x_zero_point type INT8 differ")
    fails(helper.make_node(dq, ["x", "s"], ["y"]), [("x", F, [1.0]), ("s", F, 1.0)], F,
          r"x must be an integer tensor, got .*float32")
    fails(helper.make_node(dq, ["x"], ["y"]), [("x", U8, [1])], F, r"expects inputs x and x_scale")


# ---- DynamicQuantizeLinear -----------------------------------------------------------------------


def _dynamic(x):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, None)],
                          [helper.make_tensor_value_info("y", U8, None),
                           helper.make_tensor_value_info("s", F, None),
                           helper.make_tensor_value_info("z", U8, None)])
    return st.onnx.load(helper.make_model(g)).run_numpy([np.asarray(x, np.float32)])


def test_dynamic_quantize_all_zero_input_uses_unit_range():
    y, s, z = _dynamic([0.0, 0.0])
    assert y.tolist() == [0, 0] and int(z) == 0
    assert float(s) == np.float32(1.0) / np.float32(255.0)


def test_dynamic_quantize_negative_only_input():
    x = np.array([-2.0, -1.0, -0.5], np.float32)
    y, s, z = _dynamic(x)
    scale = np.float32(2.0) / np.float32(255)
    assert float(s) == scale and int(z) == 255
    assert y.tolist() == np.clip(np.rint(x / scale) + 255, 0, 255).tolist()


def test_dynamic_quantize_rejects_integer_input():
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    fails(node, [("x", I64, [1, 2])], U8,
          r"\(DynamicQuantizeLinear\): expects a float input x, got .*int64")


# ---- QLinearMatMul and QLinearConv ---------------------------------------------------------------


def _qmm(a, a_s, a_z, b, b_s, b_z, y_s, y_z, qt):
    acc = (a.astype(np.int64) - a_z) @ (b.astype(np.int64) - b_z)
    info = np.iinfo(_NP[qt])
    return np.clip(np.rint(acc * (a_s * b_s / y_s).astype(np.float64) + y_z), info.min, info.max)


def test_qlinear_matmul_per_row_and_per_column_scales():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (3, 4)).astype(np.int8)
    b = rng.integers(-128, 128, (4, 2)).astype(np.int8)
    a_s = np.array([0.01, 0.02, 0.03], np.float32)
    a_z = np.array([1, -2, 3], np.int8)
    b_s = np.array([0.05, 0.1], np.float32)
    b_z = np.array([0, 4], np.int8)
    y_s, y_z = np.float32(0.2), np.int8(-3)
    names = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    node = helper.make_node("QLinearMatMul", names, ["y"])
    types = [I8, F, I8, I8, F, I8, F, I8]
    vals = [a, a_s, a_z, b, b_s, b_z, y_s, y_z]
    (y,) = run(node, list(zip(names, types, vals)), I8)
    want = _qmm(a, a_s.reshape(3, 1), a_z.reshape(3, 1), b, b_s, b_z, y_s, y_z, I8)
    assert y.dtype == np.int8 and y.tolist() == want.tolist()


def _qmm_feeds(y_s=0.5, a_s=0.1, b_shape=(2, 2)):
    return [("a", U8, np.ones((2, 2))), ("as", F, a_s), ("az", U8, 0),
            ("b", U8, np.ones(b_shape)), ("bs", F, 0.1), ("bz", U8, 0), ("ys", F, y_s),
            ("yz", U8, 0)]


def test_qlinear_matmul_errors():
    names = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    node = helper.make_node("QLinearMatMul", names, ["y"])
    fails(node, _qmm_feeds(y_s=[0.5, 0.5]), U8,
          r"\(QLinearMatMul\): y_scale must be a scalar, got shape \(2,\)")
    fails(node, _qmm_feeds(b_shape=(3, 2)), U8, r"a \(2, 2\) and b \(3, 2\) cannot be multiplied")
    feeds = _qmm_feeds()
    feeds[1] = ("as", I64, 1)
    fails(node, feeds, U8, r"a_scale must be a float tensor, got .*int64")
    no_b = helper.make_node("QLinearMatMul", ["a", "as", "az", "", "bs", "bz", "ys", "yz"], ["y"])
    fails(no_b, [f for f in _qmm_feeds() if f[0] != "b"], U8, r"expects inputs a and b")
    no_s = helper.make_node("QLinearMatMul", ["a", "", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    fails(no_s, [f for f in _qmm_feeds() if f[0] != "as"], U8, r"input a_scale is required")
    fails(node, [f if f[0] != "yz" else ("yz", I32, 0) for f in _qmm_feeds()], I32,
          r"output element type INT32 is not a quantized type \(uint8, int8, uint16, int16\)")


def _conv_ref(x, w, b):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    out = np.zeros((n, m, h - kh + 1, wd - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            patch = x[:, :, i:i + kh, j:j + kw]
            out[:, :, i, j] = np.einsum("nchw,mchw->nm", patch, w)
    return out + b.reshape(1, m, 1, 1)


def test_qlinear_conv_per_channel_weights_and_bias():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 2, 2)).astype(np.int8)
    x_s, x_z = np.float32(0.02), np.uint8(120)
    w_s = np.array([0.01, 0.03, 0.005], np.float32)
    w_z = np.array([0, 2, -1], np.int8)
    y_s, y_z = np.float32(0.15), np.uint8(100)
    bias = np.array([50, -300, 7], np.int32)
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
    types = [U8, F, U8, I8, F, I8, F, U8, I32]
    vals = [x, x_s, x_z, w, w_s, w_z, y_s, y_z, bias]
    (y,) = run(helper.make_node("QLinearConv", names, ["y"]), list(zip(names, types, vals)), U8)
    acc = _conv_ref(x.astype(np.float64) - x_z, w.astype(np.float64) - w_z.reshape(3, 1, 1, 1),
                    bias)
    mult = (x_s * w_s / y_s).astype(np.float64).reshape(1, 3, 1, 1)
    want = np.clip(np.rint(acc * mult + y_z), 0, 255)
    assert y.dtype == np.uint8 and y.tolist() == want.tolist()


def _qconv_feeds(xs=0.1, w=None, ws=0.1):
    w = np.ones((1, 1, 1, 1)) if w is None else w
    return [("x", U8, np.ones((1, 1, 2, 2))), ("xs", F, xs), ("xz", U8, 0), ("w", U8, w),
            ("ws", F, ws), ("wz", U8, 0), ("ys", F, 0.1), ("yz", U8, 0)]


def test_qlinear_conv_errors():
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    fails(node, _qconv_feeds(xs=[0.1, 0.2]), U8,
          r"\(QLinearConv\): x_scale \(2,\) and y_scale \(\) must be scalars")
    fails(node, _qconv_feeds(w=np.ones((1, 1))), U8, r"weight must be \(M, C/group, k...\)")
    fails(node, _qconv_feeds(ws=[0.1, 0.2]), U8,
          r"w_scale of shape \(2,\) must be a scalar or 1-D of length 1")
    no_w = helper.make_node("QLinearConv", ["x", "xs", "xz", "", "ws", "wz", "ys", "yz"], ["y"])
    fails(no_w, [f for f in _qconv_feeds() if f[0] != "w"], U8, r"expects inputs x and w")


# ---- FlexAttention -------------------------------------------------------------------------------


def _flex_ref(q, k, v, scale=None, bias=0.0):
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _bias_graph(value, elem=D):
    return helper.make_graph(
        [helper.make_node("Add", ["s", "b"], ["o"])], "mod",
        [helper.make_tensor_value_info("s", elem, None)],
        [helper.make_tensor_value_info("o", elem, None)],
        [helper.make_tensor("b", elem, [], [value])])


def test_flex_attention_gradient_through_score_mod():
    rng = np.random.default_rng(2)
    q0, k0, v0 = (rng.standard_normal((1, 2, 3, 4)) for _ in range(3))
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain=PREVIEW, scale=0.3,
                            score_mod=_bias_graph(0.7))
    m = st.onnx.load(model(node, [("q", D), ("k", D), ("v", D)], D, opset=26))
    q = st.tensor(q0, requires_grad=True)
    scale = float(np.float32(0.3))  # float attributes are stored as float32
    y = m(q, st.tensor(k0), st.tensor(v0))
    np.testing.assert_allclose(to_numpy(y), _flex_ref(q0, k0, v0, scale, 0.7), rtol=1e-12)
    w = rng.standard_normal(y.shape)
    (y * st.tensor(w)).sum().backward()
    eps, num = 1e-6, np.zeros_like(q0)
    for idx in np.ndindex(q0.shape):
        d = np.zeros_like(q0)
        d[idx] = eps
        num[idx] = ((_flex_ref(q0 + d, k0, v0, scale, 0.7)
                     - _flex_ref(q0 - d, k0, v0, scale, 0.7)) * w).sum()
    np.testing.assert_allclose(to_numpy(q.grad), num / (2 * eps), rtol=1e-6, atol=1e-9)


def test_flex_attention_softmax_precision_double_for_float32():
    rng = np.random.default_rng(3)
    q, k, v = (rng.random((1, 1, 2, 3)).astype(np.float32) for _ in range(3))
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain=PREVIEW,
                            softmax_precision=D)
    (y,) = run(node, [("q", F, q), ("k", F, k), ("v", F, v)], F, opset=26)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, _flex_ref(*(a.astype(np.float64) for a in (q, k, v))),
                               rtol=1e-6)


def test_flex_attention_errors():
    def flex(**kw):
        return helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain=PREVIEW, **kw)

    def feeds(q=(1, 2, 3, 4), k=(1, 2, 5, 4), v=(1, 2, 5, 6)):
        return [("q", F, np.zeros(q)), ("k", F, np.zeros(k)), ("v", F, np.zeros(v))]

    kw = {"opset": 26}
    fails(flex(), feeds(q=(2, 3, 4)), F,
          r"\(FlexAttention\): Q, K and V must be 4-D \(batch, heads, seq, head_size\)", **kw)
    fails(flex(), feeds(k=(1, 2, 5, 3)), F, r"K \(1, 2, 5, 3\) and V \(1, 2, 5, 6\) do not match",
          **kw)
    fails(flex(), feeds(q=(1, 3, 3, 4)), F, r"3 query heads are not a multiple of 2 kv heads",
          **kw)
    fails(flex(softmax_precision=I32), feeds(), F, r"softmax_precision 6 is not a float type",
          **kw)
    two_out = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["o"]), helper.make_node("Identity", ["s"], ["p"])],
        "mod", [helper.make_tensor_value_info("s", F, None)],
        [helper.make_tensor_value_info("o", F, None), helper.make_tensor_value_info("p", F, None)])
    fails(flex(score_mod=two_out), feeds(), F,
          r"score_mod must have exactly 1 input and 1 output, got 1 and 2", **kw)
    shrink = helper.make_graph(
        [helper.make_node("ReduceSum", ["s"], ["o"], keepdims=0)], "mod",
        [helper.make_tensor_value_info("s", F, None)],
        [helper.make_tensor_value_info("o", F, None)])
    fails(flex(prob_mod=shrink), feeds(), F, r"prob_mod changed the shape \(1, 2, 3, 5\) to \(\)",
          **kw)
    short = helper.make_node("FlexAttention", ["q", "k"], ["y"], domain=PREVIEW)
    fails(short, feeds()[:2], F, r"expects inputs Q, K and V", **kw)
