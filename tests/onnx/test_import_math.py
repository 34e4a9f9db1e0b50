"""ONNX import of math ops: values the conformance suite misses, gradients through imported
nodes, and the error paths of the handlers in singa_tensor.onnx.ops_math."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402

_CODES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
          np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32,
          np.dtype(np.bool_): TensorProto.BOOL}


def _model(op, inputs, n_out=1, opset=21, inits=(), **attrs):
    """A one-node model; inputs is a list of numpy arrays (graph inputs x0, x1, ...)."""
    names = [f"x{i}" for i in range(len(inputs))] + [n for n, _ in inits]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(f"x{i}", _CODES[a.dtype], a.shape)
         for i, a in enumerate(inputs)],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
        [numpy_helper.from_array(v, n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(op, *inputs, n_out=1, opset=21, **attrs):
    # load, not prepare: outputs declared without a type skip onnx's checker and keep our dtype
    outs = st.onnx.load(_model(op, list(inputs), n_out, opset, **attrs)).run_numpy(list(inputs))
    return outs[0] if n_out == 1 else outs


# ---- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op,ref,x", [
    ("Atan", np.arctan, np.array([-1e6, -3.0, -1.0, -0.3, 0.0, 0.2, 1.0, 2.5, 1e8])),
    ("Asin", np.arcsin, np.array([-1.0, -0.99, -0.5, 0.0, 0.3, 0.9, 1.0])),
    ("Acos", np.arccos, np.array([-1.0, -0.7, 0.0, 0.4, 0.999, 1.0])),
    ("Asinh", np.arcsinh, np.array([-50.0, -1.0, 0.0, 0.5, 30.0])),
    ("Atanh", np.arctanh, np.array([-0.9, 0.0, 0.5, 0.99])),
])
def test_inverse_trig_compositions_match_numpy(op, ref, x):
    np.testing.assert_allclose(_run(op, x), ref(x), rtol=1e-12, atol=1e-12)


def test_integer_div_and_mod_follow_c_and_python():
    a = np.array([7, -7, 7, -7, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3], np.int64)
    np.testing.assert_array_equal(_run("Div", a, b), [3, -3, -3, 3, 0])
    np.testing.assert_array_equal(_run("Mod", a, b), np.mod(a, b))
    np.testing.assert_array_equal(_run("Mod", a, b, fmod=1), np.fmod(a, b))
    fa, fb = a.astype(np.float64) + 0.5, b.astype(np.float64)
    np.testing.assert_allclose(_run("Mod", fa, fb, fmod=1), np.fmod(fa, fb))


def test_pow_keeps_the_base_type():
    y = _run("Pow", np.array([2, 3], np.int64), np.array([0.5, 2.0], np.float32))
    assert y.dtype == np.int64 and y.tolist() == [1, 9]


def test_reduce_noop_and_empty_set():
    x = np.array([[1.0, -2.0], [3.0, 4.0]])
    empty_axes = np.array([], np.int64)
    y = _run("ReduceL1", x, empty_axes, noop_with_empty_axes=1, opset=18)
    np.testing.assert_allclose(y, np.abs(x))
    y = _run("ReduceSum", x, empty_axes, opset=18)
    np.testing.assert_allclose(y, [[6.0]])
    e = np.zeros((2, 0, 3))
    y = _run("ReduceMax", e, np.array([1], np.int64), keepdims=0, opset=18)
    assert y.shape == (2, 3) and np.all(y == -np.inf)
    y = _run("ReduceProd", e, np.array([1], np.int64), opset=18)
    assert y.shape == (2, 1, 3) and np.all(y == 1.0)


def test_softmax_before_opset_13_flattens_at_axis():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    y = _run("Softmax", x, axis=1, opset=11)
    flat = x.reshape(2, 12)
    ref = np.exp(flat - flat.max(1, keepdims=True))
    np.testing.assert_allclose(y, (ref / ref.sum(1, keepdims=True)).reshape(2, 3, 4))


def test_cumsum_exclusive_reverse_and_topk_ties():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    axis = np.array(0, np.int64)
    np.testing.assert_allclose(_run("CumSum", x, axis, exclusive=1, reverse=1), [9, 7, 4, 0])
    v, i = _run("TopK", np.array([[3.0, 1.0, 3.0, 2.0]]), np.array([2], np.int64), n_out=2)
    assert v.tolist() == [[3.0, 3.0]] and i.tolist() == [[0, 2]]


def test_bitshift_out_of_range_shifts_everything_out():
    x = np.array([-8, 4, 5], np.int64)
    s = np.array([-1, 70, 1], np.int64)
    assert _run("BitShift", x, s, direction="LEFT").tolist() == [0, 0, 10]
    assert _run("BitShift", x, s, direction="RIGHT").tolist() == [-1, 0, 2]


def test_constant_scalars_stay_scalars():
    node = helper.make_node("Constant", [], ["y0"], value_float=2.5)
    g = helper.make_graph([node], "g", [],
                          [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [])])
    y = st.onnx.prepare(helper.make_model(g)).run([])[0]
    assert y.shape == () and y == np.float32(2.5)


# ---- gradients --------------------------------------------------------------------------------


def _grad_check(op, w, x, **attrs):
    """d sum(op(x, w)) / dw through the imported module against central differences."""
    m = st.onnx.load(_model(op, [x], inits=[("w", w)], **attrs))
    (p,) = [p for _, p in m.named_parameters()]
    m(st.tensor(x)).sum().backward()

    def f(wv):
        return float(np.sum(st.onnx.load(_model(op, [x], inits=[("w", wv)], **attrs))
                            .run_numpy([x])[0]))

    num = np.zeros_like(w)
    for idx in np.ndindex(w.shape):
        d = np.zeros_like(w)
        d[idx] = 1e-6
        num[idx] = (f(w + d) - f(w - d)) / 2e-6
    np.testing.assert_allclose(to_numpy(p.grad), num, rtol=1e-5, atol=1e-7)


def test_gradient_flows_through_gemm():
    rng = np.random.default_rng(1)
    _grad_check("Gemm", rng.normal(size=(4, 3)), rng.normal(size=(2, 3)), transB=1, alpha=0.5)


def test_gradient_flows_through_det():
    rng = np.random.default_rng(2)
    w = rng.normal(size=(3, 3))
    # Det of (x + w): an Add then Det in one model
    nodes = [helper.make_node("Add", ["x0", "w"], ["s"]), helper.make_node("Det", ["s"], ["y0"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x0", TensorProto.DOUBLE, [3, 3])],
                          [helper.make_tensor_value_info("y0", TensorProto.DOUBLE, [])],
                          [numpy_helper.from_array(w, "w")])
    m = st.onnx.load(helper.make_model(g))
    x = np.zeros((3, 3))
    y = m(st.tensor(x))
    np.testing.assert_allclose(y.item(), np.linalg.det(w), rtol=1e-10)
    y.backward()
    grad = to_numpy(dict(m.named_parameters())["w"].grad)
    np.testing.assert_allclose(grad, np.linalg.det(w) * np.linalg.inv(w).T, rtol=1e-8)


def test_gradient_flows_through_atan_composition():
    x = st.tensor([-4.0, -0.5, 0.3, 2.0], dtype=st.float64, requires_grad=True)
    from singa_tensor.onnx.ops_math import _atan

    _atan(x).sum().backward()
    xv = to_numpy(x)
    np.testing.assert_allclose(to_numpy(x.grad), 1.0 / (1.0 + xv * xv), rtol=1e-10)


# ---- errors -----------------------------------------------------------------------------------


def _fails(match, op, *inputs, opset=21, n_out=1, **attrs):
    with pytest.raises(OnnxImportError, match=match):
        _run(op, *inputs, n_out=n_out, opset=opset, **attrs)


F = np.ones((2, 3))
I64 = np.array([1, 0], np.int64)


def test_error_paths():
    _fails(r"\(Cast\): .*STRING is not supported", "Cast", F, to=TensorProto.STRING)
    _fails(r"\(Cast\): attribute 'to' is required", "Cast", F)
    _fails(r"\(Div\): integer division by zero", "Div", I64, I64)
    _fails(r"\(Mod\): integer modulo by zero", "Mod", I64, I64)
    _fails(r"\(BitShift\): direction must be", "BitShift", I64, I64, direction="UP")
    _fails(r"\(BitwiseAnd\): expected integer inputs, got float64", "BitwiseAnd", F, F)
    _fails(r"\(Gemm\): inner dimensions differ", "Gemm", F, F)
    _fails(r"\(Gemm\): A and B must be 2-D", "Gemm", np.ones(3), F)
    _fails(r"\(MatMul\): shapes \(2, 3\) and \(2, 3\) cannot be multiplied", "MatMul", F, F)
    _fails(r"\(Softmax\): axis 3 is out of range for a rank-2 input", "Softmax", F, axis=3)
    _fails(r"\(TopK\): k = 5 is out of range", "TopK", F, np.array([5], np.int64), n_out=2)
    _fails(r"\(ReduceSum\): axes \[1, -1\] repeat a dimension", "ReduceSum", F,
           np.array([1, -1], np.int64))
    _fails(r"\(ReduceMean\): axes is an input since opset 18", "ReduceMean", F, axes=[0])
    _fails(r"\(Where\): condition must be bool, got float64", "Where", F, F, F)
    _fails(r"\(Det\): expected \(\.\.\., n, n\) matrices, got shape \(2, 3\)", "Det", F)
    _fails(r"\(Dropout\): ratio must be in \[0, 1\), got 1.0", "Dropout", F, np.array(1.0))
    _fails(r"\(ArgMax\): cannot take an arg-extremum along empty axis",
           "ArgMax", np.zeros((0, 2)))
    _fails(r"\(Add\): expected 2 inputs, got 1", "Add", F)
    _fails(r"\(Equal\): input types differ: float64 and int64", "Equal", F, np.ones(3, np.int64))
    _fails(r"\(Einsum\): an 'equation' attribute", "Einsum", F)
    with pytest.raises(OnnxImportError, match=r"\(Constant\): expected exactly one value "
                       r"attribute, got \['value_float', 'value_string'\]"):
        node = helper.make_node("Constant", [], ["y0"], value_string="hi", value_float=1.0)
        g = helper.make_graph([node], "g", [],
                              [helper.make_tensor_value_info("y0", TensorProto.STRING, [])])
        st.onnx.load(helper.make_model(g)).run_numpy([])


# ---- attribute -> input moves across opsets ---------------------------------------------------


def test_old_opsets_read_attributes():
    x = np.array([[-2.0, 0.5, 3.0, 1.0]])
    np.testing.assert_allclose(_run("Clip", x, opset=6, min=-1.0, max=2.0), np.clip(x, -1, 2))
    np.testing.assert_allclose(_run("Clip", x, np.array(0.0), opset=13), np.clip(x, 0, None))
    v, i = _run("TopK", x, n_out=2, opset=9, k=2)
    assert v.tolist() == [[3.0, 1.0]] and i.tolist() == [[2, 3]]
    np.testing.assert_allclose(_run("ReduceMean", x, axes=[1], keepdims=0, opset=13), [0.625])
    np.testing.assert_allclose(_run("ReduceSum", x, axes=[0], opset=11), x)
    assert _run("Hardmax", x, opset=11).tolist() == [[0.0, 0.0, 1.0, 0.0]]
    y, mask = _run("Dropout", x, n_out=2, opset=10, ratio=0.3)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.all()


def test_topk_values_carry_the_gradient():
    w = np.array([[0.1, 0.9, 0.5, 0.7]])
    nodes = [helper.make_node("Add", ["x0", "w"], ["s"]),
             helper.make_node("TopK", ["s", "k"], ["y0", "i"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x0", TensorProto.DOUBLE, [1, 4])],
                          [helper.make_tensor_value_info("y0", TensorProto.DOUBLE, [1, 2])],
                          [numpy_helper.from_array(w, "w"),
                           numpy_helper.from_array(np.array([2], np.int64), "k")])
    m = st.onnx.load(helper.make_model(g))
    m(st.tensor(np.zeros((1, 4)))).sum().backward()
    assert dict(m.named_parameters())["w"].grad.tolist() == [[0.0, 1.0, 0.0, 1.0]]
