"""Import of float8, float4, int4 and int2 values, which live on the host (onnx/_lowp.py).

Complements the conformance suite: a quantize-dequantize model through float8 with a float8
initializer, a Constant and a Reshape on the way checked against onnx's reference evaluator,
graph inputs and outputs of these types, int4 quantization, E8M0's rounding modes, and the
error paths (an op that does not take such values, bad `saturate`, `round_mode` and `to`).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
E4M3, E5M2, E8M0, INT4 = (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2,
                          TensorProto.FLOAT8E8M0, TensorProto.INT4)


def graph_model(nodes, ins, outs, inits=(), opset=25):
    """ins and outs: [(name, elem_type)]."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, e, None) for n, e in ins],
                          [helper.make_tensor_value_info(n, e, None) for n, e in outs],
                          list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def both(m, feeds):
    """(ours, the reference evaluator's) outputs for numpy feeds."""
    ours = st.onnx.load(m).run_numpy(list(feeds))
    names = [i.name for i in m.graph.input]
    ref = ReferenceEvaluator(m).run(None, dict(zip(names, feeds)))
    return ours, ref


def same_bits(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


# ---- end to end ---------------------------------------------------------------------------------


def test_quantize_dequantize_float8_matches_the_reference_evaluator():
    # float32 -> QuantizeLinear (float8 zero point initializer) -> Reshape of the float8 value
    # -> DequantizeLinear with a Constant float8 zero point -> float32, with ties, overflow
    # (saturated), NaN and subnormals in the input
    zp = numpy_helper.from_array(np.zeros((), ml_dtypes.float8_e4m3fn), "zp")
    zc = helper.make_tensor("zc", E4M3, [], [0.0])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
        helper.make_node("Constant", [], ["zc"], value=zc),
        helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(
            np.array([3, -1], np.int64))),
        helper.make_node("Reshape", ["q", "shape"], ["q2"]),
        helper.make_node("DequantizeLinear", ["q2", "s", "zc"], ["y"]),
    ]
    m = graph_model(nodes, [("x", F), ("s", F)], [("y", F), ("q2", E4M3)], [zp])
    x = np.array([0.0, 1.0, 1.0625, 1.1875, -3.3, 500.0, -1e9, np.inf, np.nan, 2e-3, 5e-4, 17.0],
                 np.float32)
    s = np.array(0.5, np.float32)
    (y, q), (ry, rq) = both(m, [x, s])
    same_bits(q, rq)
    assert y.dtype == np.float32 and y.shape == (3, 4)
    np.testing.assert_array_equal(y, ry)
    assert y[1, 1] == 448.0 * 0.5 and y[1, 2] == -448.0 * 0.5  # saturated to E4M3FN's max
    # again, through the inference path's later calls (recorded or eager), same result
    mod = st.onnx.load(m)
    with st.no_grad():
        for _ in range(3):
            out = mod(st.tensor(x), st.tensor(s))
    np.testing.assert_array_equal(out[0].numpy(), ry)
    same_bits(out[1], rq)


def test_float8_graph_input_and_output_keep_their_type():
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=E5M2),
             helper.make_node("Transpose", ["y"], ["t"])]
    m = graph_model(nodes, [("x", E4M3)], [("t", E5M2)])
    x = np.array([[1.0, -2.5], [448.0, 0.015625]], ml_dtypes.float8_e4m3fn)
    (ours,), (ref,) = both(m, [x])
    assert ours.dtype == ml_dtypes.float8_e5m2
    same_bits(ours, ref)


def test_int4_quantize_saturates_and_dequantizes():
    zp = numpy_helper.from_array(np.array([1, -2], ml_dtypes.int4), "zp")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)]
    m = graph_model(nodes, [("x", F), ("s", F)], [("q", INT4), ("y", F)], [zp])
    x = np.array([[0.5, 1.5], [100.0, -100.0], [-2.5, 2.5]], np.float32)
    s = np.array([1.0, 0.5], np.float32)
    (q, y), (rq, ry) = both(m, [x, s])
    assert q.dtype == ml_dtypes.int4
    assert q.astype(np.int8).tolist() == [[1, 1], [7, -8], [-1, 3]]
    same_bits(q, rq)
    np.testing.assert_array_equal(y, ry)


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_e8m0_round_modes_match_the_reference_evaluator(mode, saturate):
    node = helper.make_node("Cast", ["x"], ["y"], to=E8M0, saturate=saturate, round_mode=mode)
    m = graph_model([node], [("x", F)], [("y", E8M0)])
    x = np.array([1.0, 1.5, 1.25, 1.75, 3.0, -6.0, 0.0, 1e-40, 6e-39, 3e38, np.inf, np.nan,
                  2.0 ** 127, 2.0 ** 127 * 1.5], np.float32)
    (ours,), (ref,) = both(m, [x])
    same_bits(ours, ref)


def test_e8m0_rounding_values():
    def cast(values, mode, saturate=1):
        node = helper.make_node("Cast", ["x"], ["y"], to=E8M0, round_mode=mode,
                                saturate=saturate)
        m = graph_model([node], [("x", F)], [("y", E8M0)])
        (y,) = st.onnx.load(m).run_numpy([np.array(values, np.float32)])
        return y.astype(np.float32).tolist()

    assert cast([1.5, 3.0, 5.0], "up") == [2.0, 4.0, 8.0]
    assert cast([1.5, 3.0, 5.0], "down") == [1.0, 2.0, 4.0]
    assert cast([1.4, 1.5, 5.0, 7.0], "nearest") == [1.0, 2.0, 4.0, 8.0]
    top = 2.0 ** 127 * 1.5
    assert cast([top], "up") == [2.0 ** 127]
    assert np.isnan(cast([top], "up", saturate=0)[0])


# ---- errors -------------------------------------------------------------------------------------


def fails(m, feeds, match):
    with pytest.raises(OnnxImportError, match=match):
        st.onnx.load(m).run_numpy(feeds)


def test_an_op_that_does_not_take_float8_names_node_and_type():
    nodes = [helper.make_node("Cast", ["x"], ["q"], to=E4M3),
             helper.make_node("Relu", ["q"], ["y"], name="act")]
    m = graph_model(nodes, [("x", F)], [("y", E4M3)])
    fails(m, [np.ones(2, np.float32)],
          r"node 'act' \(Relu\): input 'q' has element type FLOAT8E4M3FN, which this op does "
          r"not take")
    add = graph_model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                      [("a", F), ("b", INT4)], [("y", F)])
    fails(add, [np.ones(2, np.float32), np.ones(2, ml_dtypes.int4)],
          r"node 'add' \(Add\): input 'b' has element type INT4")


def test_mixed_element_types_in_one_move_are_refused():
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=0, name="cat")
    m = graph_model([node], [("a", E4M3), ("b", E5M2)], [("y", E4M3)])
    fails(m, [np.ones(2, ml_dtypes.float8_e4m3fn), np.ones(2, ml_dtypes.float8_e5m2)],
          r"node 'cat' \(Concat\): inputs of different element types: FLOAT8E4M3FN, FLOAT8E5M2")


def test_bad_cast_attributes():
    x = [np.ones(2, np.float32)]
    for attrs, match in (({"saturate": 2}, r"attribute saturate must be 0 or 1, got 2"),
                         ({"round_mode": "odd"},
                          r"attribute round_mode must be one of up, down, nearest, got 'odd'")):
        node = helper.make_node("Cast", ["x"], ["y"], to=E8M0, name="c", **attrs)
        fails(graph_model([node], [("x", F)], [("y", E8M0)]), x, r"node 'c' \(Cast\): " + match)
    # saturate is checked whatever the target type
    node = helper.make_node("Cast", ["x"], ["y"], to=F, saturate=-1, name="c")
    fails(graph_model([node], [("x", F)], [("y", F)]), x, r"saturate must be 0 or 1, got -1")
    node = helper.make_node("CastLike", ["x", "like"], ["y"], saturate=3, name="cl")
    fails(graph_model([node], [("x", F), ("like", E4M3)], [("y", E4M3)]),
          x + [np.ones(1, ml_dtypes.float8_e4m3fn)], r"\(CastLike\): attribute saturate")
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=E4M3, saturate=5)
    fails(graph_model([node], [("x", F), ("s", F)], [("y", E4M3)]),
          x + [np.array(1.0, np.float32)], r"\(QuantizeLinear\): attribute saturate must be 0")


def test_bad_cast_target_types():
    f8 = [np.ones(2, ml_dtypes.float8_e4m3fn)]
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING, name="c")
    fails(graph_model([node], [("x", E4M3)], [("y", TensorProto.STRING)]), f8,
          r"node 'c' \(Cast\): cannot cast FLOAT8E4M3FN to STRING")
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.COMPLEX64, name="c")
    fails(graph_model([node], [("x", F)], [("y", TensorProto.COMPLEX64)]),
          [np.ones(2, np.float32)], r"node 'c' \(Cast\): element type COMPLEX64 is not supported")


def test_quantize_to_e8m0_and_nonzero_float8_zero_point_are_refused():
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=E8M0)
    fails(graph_model([node], [("x", F), ("s", F)], [("y", E8M0)]),
          [np.ones(2, np.float32), np.array(1.0, np.float32)],
          r"output element type FLOAT8E8M0 is not a quantized type")
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])
    fails(graph_model([node], [("x", E4M3), ("s", F), ("z", E4M3)], [("y", F)]),
          [np.ones(2, ml_dtypes.float8_e4m3fn), np.array(1.0, np.float32),
           np.array(2.0, ml_dtypes.float8_e4m3fn)],
          r"x_zero_point must be zero for FLOAT8E4M3FN")
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"])
    fails(graph_model([node], [("x", E4M3), ("s", F)], [("y", TensorProto.UINT8)]),
          [np.ones(2, ml_dtypes.float8_e4m3fn), np.array(1.0, np.float32)],
          r"x has element type FLOAT8E4M3FN; it must be a float or int32 tensor")


def test_qlinear_matmul_refuses_a_4_bit_zero_point():
    names = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    yz = numpy_helper.from_array(np.array(0, ml_dtypes.int4), "yz")
    node = helper.make_node("QLinearMatMul", names, ["y"], name="qmm")
    u8 = TensorProto.UINT8
    m = graph_model([node], [("a", u8), ("as", F), ("az", u8), ("b", u8), ("bs", F),
                             ("bz", u8), ("ys", F)], [("y", INT4)], [yz])
    one, f1 = np.ones((2, 2), np.uint8), np.array(1.0, np.float32)
    fails(m, [one, f1, np.array(0, np.uint8), one, f1, np.array(0, np.uint8), f1],
          r"node 'qmm' \(QLinearMatMul\): input 'yz' has element type INT4, which this op "
          r"does not take")


def test_a_float8_input_the_model_does_not_declare_is_refused():
    m = graph_model([helper.make_node("Relu", ["x"], ["y"])], [("x", F)], [("y", F)])
    fails(m, [np.ones(2, ml_dtypes.float8_e4m3fn)],
          r"onnx model: input 'x' is FLOAT8E4M3FN, a type the model declares nowhere")


def _fake_quantized_weight_model(scale_input: bool):
    # y = x * DequantizeLinear(QuantizeLinear(c, s)) with c constant, s an input or constant;
    # q is an output too
    inits = [numpy_helper.from_array(np.array([1.3, -2.7, 300.0], np.float32), "c")]
    ins = [("x", F), ("s", F)]
    if not scale_input:
        inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "s"))
        ins = ins[:1]
    nodes = [helper.make_node("QuantizeLinear", ["c", "s"], ["q"], output_dtype=E4M3),
             helper.make_node("DequantizeLinear", ["q", "s"], ["d"]),
             helper.make_node("Mul", ["x", "d"], ["y"])]
    return graph_model(nodes, ins, [("y", F), ("q", E4M3)], inits, opset=23)


def test_gradients_reach_the_float_side_of_a_quantized_weight():
    m = st.onnx.load(_fake_quantized_weight_model(scale_input=True))
    x = st.tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    s = st.tensor(np.array(0.5, np.float32), requires_grad=True)
    y, q = m(x, s)
    y.sum().backward()
    d = q.astype(np.float32) * 0.5  # 1.25, -2.75, 224 (saturated at 448 * 0.5)
    np.testing.assert_array_equal(x.grad.numpy(), d)
    # d(sum(x * q * s)) / ds = sum(x * q); q itself is a step function of s and gets none
    np.testing.assert_allclose(s.grad.numpy(), np.sum(np.array([1.0, 2.0, 3.0]) * q.astype(
        np.float32)), rtol=1e-6)


def test_a_constant_float8_value_is_replayed_by_the_inference_path():
    mp = _fake_quantized_weight_model(scale_input=False)
    m, ref = st.onnx.load(mp), ReferenceEvaluator(mp)
    for i in range(5):
        x = np.array([i, 2 * i + 1, -i], np.float32)
        with st.no_grad():
            y, q = m(st.tensor(x))
        ry, rq = ref.run(None, {"x": x})
        np.testing.assert_array_equal(y.numpy(), ry)
        same_bits(q, rq)
    assert m.fast_stats()["replays"] == 3
