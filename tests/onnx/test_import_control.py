"""Import of ONNX control flow (If, Loop, Scan), sequences, optionals and Gradient.

Complements the conformance suite: outer-scope reads from bodies, gradients through loops,
the opset-8 Scan form, and every error path of the handlers in `onnx/ops_control.py`.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402

F, D, I64, B = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=None):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    kw = {"opset_imports": [helper.make_opsetid("", opset)]} if opset else {}
    return helper.make_model(g, **kw)


def body(nodes, inputs, outputs):
    return helper.make_graph(nodes, "body", inputs, outputs)


def t(a, dtype=np.float32):
    return st.tensor(np.asarray(a, dtype))


# ---- If ----------------------------------------------------------------------------------------


def _if_model():
    # the branches read x from the enclosing graph
    then = body([helper.make_node("Add", ["x", "x"], ["r"])], [], [vi("r")])
    other = body([helper.make_node("Neg", ["x"], ["r2"])], [], [vi("r2")])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    return model([node], [vi("c", B, [1]), vi("x", F, [2])], [vi("y")])


def test_if_picks_branch_reading_outer_scope():
    m = st.onnx.load(_if_model())
    x = t([1.0, -2.0])
    assert m(st.tensor([True]), x).tolist() == [2.0, -4.0]
    assert m(st.tensor([False]), x).tolist() == [-1.0, 2.0]


def test_if_condition_must_have_one_element():
    m = st.onnx.load(_if_model())
    with pytest.raises(OnnxImportError, match=r"\(If\): condition must be a one-element"):
        m(st.tensor([True, False]), t([1.0, 2.0]))


# ---- Loop --------------------------------------------------------------------------------------


def _loop_model(elem=F, extra_out=False):
    # y_out = y_in * w with w an outer initializer; scan output collects every y_out
    outs = [vi("cond_out", B, []), vi("y_out", elem), vi("scan", elem)]
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Mul", ["y_in", "w"], ["y_out"]),
             helper.make_node("Identity", ["y_out"], ["scan"])]
    if extra_out:
        outs.append(vi("extra", elem))
        nodes.append(helper.make_node("Identity", ["y_out"], ["extra"]))
    b = body(nodes, [vi("i", I64, []), vi("cond_in", B, []), vi("y_in", elem)], outs)
    node = helper.make_node("Loop", ["M", "", "y0"], ["y", "ys"], body=b)
    np_t = np.float64 if elem == D else np.float32
    w = numpy_helper.from_array(np.array([1.5, -0.5], np_t), "w")
    return model([node], [vi("M", I64, [1]), vi("y0", elem, [2])],
                 [vi("y", elem), vi("ys", elem)], [w])


def test_loop_values_and_scan_outputs():
    m = st.onnx.load(_loop_model())
    with st.no_grad():
        y, ys = m(st.tensor([3]), t([1.0, 2.0]))
    np.testing.assert_allclose(to_numpy(y), [1.5 ** 3, 2.0 * (-0.5) ** 3])
    assert ys.shape == (3, 2)
    np.testing.assert_allclose(to_numpy(ys)[0], [1.5, -1.0])


def test_loop_gradient_reaches_outer_initializer():
    m = st.onnx.load(_loop_model(D))
    y0 = st.tensor(np.array([1.0, 2.0]))
    y, _ = m(st.tensor([3]), y0)
    y.sum().backward()
    w = to_numpy(m.w)
    # d(y0 * w^3)/dw = 3 y0 w^2, checked also by central differences
    np.testing.assert_allclose(to_numpy(m.w.grad), 3 * np.array([1.0, 2.0]) * w ** 2)
    eps = 1e-6
    fd = []
    for k in range(2):
        d = np.zeros(2)
        d[k] = eps
        fd.append((np.sum(np.array([1.0, 2.0]) * (w + d) ** 3)
                   - np.sum(np.array([1.0, 2.0]) * (w - d) ** 3)) / (2 * eps))
    np.testing.assert_allclose(to_numpy(m.w.grad), fd, rtol=1e-6)


def test_loop_body_output_count_is_checked():
    m = st.onnx.load(_loop_model(extra_out=True))
    with pytest.raises(OnnxImportError, match=r"\(Loop\): body has 4 outputs, expected 3"):
        m(st.tensor([2]), t([1.0, 2.0]))


def test_loop_trip_count_must_be_scalar():
    m = st.onnx.load(_loop_model())
    with pytest.raises(OnnxImportError, match=r"trip count M must hold one integer"):
        m(st.tensor([2, 3]), t([1.0, 2.0]))


# ---- Scan --------------------------------------------------------------------------------------


def _cumsum_body():
    return body([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                 helper.make_node("Identity", ["s_out"], ["o"])],
                [vi("s_in"), vi("x_t")], [vi("s_out"), vi("o")])


def test_scan_reverse_direction_and_output_axis():
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=_cumsum_body(),
                            num_scan_inputs=1, scan_input_directions=[1],
                            scan_output_axes=[1])
    m = st.onnx.load(model([node], [vi("s0", F, [2]), vi("x", F, [3, 2])],
                           [vi("s"), vi("ys")]))
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    s, ys = m(t([0.0, 0.0]), t(x))
    np.testing.assert_allclose(to_numpy(s), x.sum(0))
    want = np.stack([x[2], x[2] + x[1], x.sum(0)], 0)  # accumulated from the end
    np.testing.assert_allclose(to_numpy(ys), want.T)     # scan axis moved to 1


def test_scan_opset8_batch_axis_and_sequence_lens():
    node = helper.make_node("Scan", ["lens", "s0", "x"], ["s", "ys"], body=_cumsum_body(),
                            num_scan_inputs=1)
    m = st.onnx.load(model([node], [vi("lens", I64, [2]), vi("s0", F, [2, 1]),
                                    vi("x", F, [2, 3, 1])], [vi("s"), vi("ys")], opset=8))
    x = np.arange(6, dtype=np.float32).reshape(2, 3, 1)
    s, ys = m(st.tensor([3, 2]), t(np.zeros((2, 1))), t(x))
    np.testing.assert_allclose(to_numpy(s), [x[0].sum(0), x[1, :2].sum(0)])
    want = np.cumsum(x, 1)
    want[1, 2] = 0.0  # past the second entry's length
    np.testing.assert_allclose(to_numpy(ys), want)


def test_scan_num_scan_inputs_is_checked():
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=_cumsum_body(),
                            num_scan_inputs=3)
    m = st.onnx.load(model([node], [vi("s0", F, [2]), vi("x", F, [3, 2])],
                           [vi("s"), vi("ys")]))
    with pytest.raises(OnnxImportError, match=r"\(Scan\): num_scan_inputs=3 does not fit 2"):
        m(t([0.0, 0.0]), t(np.ones((3, 2))))


# ---- sequences and optionals -------------------------------------------------------------------


def _seq_model(extra_nodes, out):
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0, keepdims=1)]
    return model(nodes + extra_nodes, [vi("x", F, [3, 2]), vi("p", I64, [1])], [out])


X = np.arange(6, dtype=np.float32).reshape(3, 2)


def test_sequence_ops_roundtrip():
    nodes = [helper.make_node("SequenceErase", ["seq", "p"], ["s1"]),
             helper.make_node("SequenceAt", ["seq", "p"], ["row"]),
             helper.make_node("SequenceInsert", ["s1", "row"], ["s2"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)]
    m = st.onnx.load(_seq_model(nodes, vi("y")))
    # move row p to the end
    np.testing.assert_allclose(to_numpy(m(t(X), st.tensor([0]))), X[[1, 2, 0]])
    np.testing.assert_allclose(to_numpy(m(t(X), st.tensor([-2]))), X[[0, 2, 1]])


def test_sequence_length_and_stack():
    nodes = [helper.make_node("SequenceLength", ["seq"], ["n"]),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=-1, new_axis=1)]
    m = st.onnx.load(model([helper.make_node("SplitToSequence", ["x"], ["seq"], keepdims=0)]
                           + nodes, [vi("x", F, [3, 2])], [vi("n", I64), vi("y")]))
    n, y = m(t(X))
    assert n.item() == 3
    np.testing.assert_allclose(to_numpy(y), X.T)


def test_sequence_at_position_out_of_range():
    m = st.onnx.load(_seq_model([helper.make_node("SequenceAt", ["seq", "p"], ["y"])], vi("y")))
    with pytest.raises(OnnxImportError,
                       match=r"\(SequenceAt\): position 3 is out of range for a sequence of "
                             r"length 3"):
        m(t(X), st.tensor([3]))


def test_split_to_sequence_bad_sizes():
    node = helper.make_node("SplitToSequence", ["x", "s"], ["seq"])
    cat = helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0)
    m = st.onnx.load(model([node, cat], [vi("x", F, [3, 2]), vi("s", I64, [2])], [vi("y")]))
    with pytest.raises(OnnxImportError, match=r"split sizes \[1, 1\] do not add up to 3"):
        m(t(X), st.tensor([1, 1]))


def test_concat_and_erase_of_empty_sequence():
    empty = helper.make_node("SequenceEmpty", [], ["e"])
    cat = helper.make_node("ConcatFromSequence", ["e"], ["y"], axis=0)
    m = st.onnx.load(model([empty, cat], [], [vi("y")]))
    with pytest.raises(OnnxImportError, match=r"\(ConcatFromSequence\): cannot concatenate an "
                                              r"empty sequence"):
        m()
    erase = helper.make_node("SequenceErase", ["e"], ["e2"])
    n = helper.make_node("SequenceLength", ["e2"], ["y"])
    m = st.onnx.load(model([empty, erase, n], [], [vi("y", I64)]))
    with pytest.raises(OnnxImportError, match=r"cannot erase from an empty sequence"):
        m()


def test_sequence_map_runs_body_per_element():
    b = body([helper.make_node("Mul", ["e", "k"], ["o"])], [vi("e"), vi("k")], [vi("o")])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"]),
             helper.make_node("SequenceMap", ["seq", "k"], ["out"], body=b),
             helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=0)]
    m = st.onnx.load(model(nodes, [vi("x", F, [3, 2]), vi("k", F, [2])], [vi("y")]))
    np.testing.assert_allclose(to_numpy(m(t(X), t([2.0, -1.0]))), X * [2.0, -1.0])


def test_optional_ops():
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["y"]),
             helper.make_node("Optional", [], ["none"],
                              type=helper.make_tensor_type_proto(F, [2])),
             helper.make_node("OptionalHasElement", ["none"], ["has_none"])]
    m = st.onnx.load(model(nodes, [vi("x", F, [2])],
                           [vi("has", B), vi("y"), vi("has_none", B)]))
    has, y, has_none = m(t([1.0, 2.0]))
    assert has.item() is True and has_none.item() is False
    assert y.tolist() == [1.0, 2.0]


def test_optional_get_element_of_empty():
    nodes = [helper.make_node("Optional", [], ["none"],
                              type=helper.make_tensor_type_proto(F, [2])),
             helper.make_node("OptionalGetElement", ["none"], ["y"])]
    m = st.onnx.load(model(nodes, [], [vi("y")]))
    with pytest.raises(OnnxImportError, match=r"\(OptionalGetElement\): the optional input "
                                              r"is empty"):
        m()


# ---- Gradient (ai.onnx.preview.training) -------------------------------------------------------


def test_gradient_node_differentiates_the_graph():
    nodes = [helper.make_node("Mul", ["a", "b"], ["c"]),
             helper.make_node("Mul", ["c", "a"], ["d"]),
             helper.make_node("Gradient", ["a", "b"], ["da", "db"], xs=["a", "b"], y="d",
                              domain="ai.onnx.preview.training")]
    g = helper.make_graph(nodes, "g", [vi("a", F, [2]), vi("b", F, [2])],
                          [vi("d"), vi("da"), vi("db")])
    m = st.onnx.load(helper.make_model(g, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.preview.training", 1)]))
    a, b = np.array([1.0, 2.0], np.float32), np.array([3.0, -1.0], np.float32)
    d, da, db = m(t(a), t(b))
    np.testing.assert_allclose(to_numpy(d), a * a * b)
    np.testing.assert_allclose(to_numpy(da), 2 * a * b)
    np.testing.assert_allclose(to_numpy(db), a * a)
