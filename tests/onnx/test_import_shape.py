"""Import of ONNX shape/index ops: old-opset attribute forms, gradients through imported
nodes, and the error paths (the conformance suite covers the common forward cases)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402

F64, I64 = TensorProto.DOUBLE, TensorProto.INT64


def _model(op, inputs, attrs=None, opset=18, consts=None, n_out=1, out_type=F64, order=None):
    """A one-node model; inputs are (name, elem_type, shape); consts name -> numpy array; the
    node reads the graph inputs then the constants, or the names in `order`."""
    consts = consts or {}
    names = order or [n for n, _, _ in inputs] + list(consts)
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_out)], **(attrs or {}))
    g = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(f"y{i}", out_type, None) for i in range(n_out)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, *arrays):
    # load, not prepare: the one-node models leave output shapes to inference
    return st.onnx.load(model).run_numpy(list(arrays))


def _x(*shape):
    return np.arange(np.prod(shape), dtype=np.float64).reshape(shape)


# ---- attribute forms of older opsets --------------------------------------------------------


def test_slice_attrs_opset9_and_negative_step_inputs():
    x = _x(4, 5)
    m = _model("Slice", [("x", F64, [4, 5])],
               {"starts": [1, -100], "ends": [1000, -1], "axes": [0, 1]}, opset=9)
    np.testing.assert_array_equal(_run(m, x)[0], x[1:, 0:-1])
    m = _model("Slice", [("x", F64, [4, 5])], opset=13,
               consts={"s": np.array([10, 3]), "e": np.array([-100, 0]),
                       "a": np.array([0, -1]), "k": np.array([-2, -1])})
    np.testing.assert_array_equal(_run(m, x)[0], x[::-2, 3:0:-1])


def test_pad_attrs_opset2_and_axes_input():
    x = _x(2, 3)
    m = _model("Pad", [("x", F64, [2, 3])], {"pads": [1, 0, 0, 2], "value": 7.0}, opset=2)
    np.testing.assert_array_equal(_run(m, x)[0], np.pad(x, ((1, 0), (0, 2)), constant_values=7))
    m = _model("Pad", [("x", F64, [2, 3])], {"mode": "edge"}, opset=18,
               consts={"p": np.array([2, 1]), "v": np.array(0.0), "a": np.array([-1])})
    np.testing.assert_array_equal(_run(m, x)[0], np.pad(x, ((0, 0), (2, 1)), mode="edge"))


@pytest.mark.parametrize("mode, pads, np_pads, np_mode", [
    ("wrap", [0, 7, 0, 5], ((0, 0), (7, 5)), "wrap"),  # wraps around more than once
    ("edge", [0, -1, 1, 2], ((0, 1), (0, 2)), "edge"),  # a negative pad crops first
    ("reflect", [1, -1, 0, 1], ((1, 0), (0, 1)), "reflect"),
])
def test_pad_modes_beyond_one_period_and_negative(mode, pads, np_pads, np_mode):
    x = _x(2, 3)
    m = _model("Pad", [("x", F64, [2, 3])], {"mode": mode}, consts={"p": np.array(pads)})
    crop = x[:, 1:] if min(pads) < 0 else x
    np.testing.assert_array_equal(_run(m, x)[0], np.pad(crop, np_pads, mode=np_mode))


def test_squeeze_unsqueeze_split_attrs_opset11():
    x = _x(1, 3, 1)
    sq = _model("Squeeze", [("x", F64, [1, 3, 1])], {"axes": [0, -1]}, opset=11)
    assert _run(sq, x)[0].shape == (3,)
    un = _model("Unsqueeze", [("x", F64, [1, 3, 1])], {"axes": [-1, 0]}, opset=11)
    assert _run(un, x)[0].shape == (1, 1, 3, 1, 1)
    sp = _model("Split", [("x", F64, [5, 2])], {"split": [2, 3]}, opset=11, n_out=2)
    a, b = _run(sp, _x(5, 2))
    np.testing.assert_array_equal(b, _x(5, 2)[2:])


def test_reshape_zero_copies_dim_unless_allowzero():
    x = _x(2, 3, 4)
    m = _model("Reshape", [("x", F64, [2, 3, 4])], consts={"s": np.array([0, -1])})
    assert _run(m, x)[0].shape == (2, 12)
    m = _model("Reshape", [("x", F64, [0, 3])], {"allowzero": 1}, consts={"s": np.array([3, 0])})
    assert _run(m, np.zeros((0, 3)))[0].shape == (3, 0)


def test_shape_gather_concat_reshape_chain():
    # the shape arithmetic of exported graphs: flatten all but the batch dim
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n1"], axis=0),
             helper.make_node("Concat", ["n1", "m1"], ["shp"], axis=0),
             helper.make_node("Reshape", ["x", "shp"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0]), "i0"),
             numpy_helper.from_array(np.array([-1]), "m1")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F64, [3, 2, 2])],
                          [helper.make_tensor_value_info("y", F64, None)], inits)
    out = _run(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), _x(3, 2, 2))
    np.testing.assert_array_equal(out[0], _x(3, 4))


def test_gather_scalar_index_drops_the_axis():
    m = _model("Gather", [("x", F64, [2, 3])], {"axis": 1}, consts={"i": np.array(-1)})
    out = _run(m, _x(2, 3))[0]
    np.testing.assert_array_equal(out, _x(2, 3)[:, -1])


def test_scatter_nd_duplicates_apply_in_order():
    x = np.ones((4,), np.float64)
    m = _model("ScatterND", [("x", F64, [4])], {"reduction": "mul"},
               consts={"i": np.array([[1], [1], [3]]), "u": np.array([2.0, 5.0, -1.0])})
    np.testing.assert_array_equal(_run(m, x)[0], [1, 10, 1, -1])


def test_gather_nd_batch_dims():
    x = _x(2, 3, 2)
    idx = np.array([[[2], [0]], [[1], [1]]])
    m = _model("GatherND", [("x", F64, [2, 3, 2])], {"batch_dims": 1}, consts={"i": idx})
    np.testing.assert_array_equal(_run(m, x)[0], np.stack([x[0][[2, 0]], x[1][[1, 1]]]))


# ---- gradients through imported nodes --------------------------------------------------------


def _grad_ok(model, shape):
    mod = st.onnx.load(model)
    x = st.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    assert st.autograd.gradcheck(lambda t: mod(t), [x])


@pytest.mark.parametrize("make", [
    lambda: _model("Gather", [("x", F64, [4, 3])], {"axis": 0},
                   consts={"i": np.array([[3, -4], [3, 1]])}),
    lambda: _model("Slice", [("x", F64, [4, 3])],
                   consts={"s": np.array([-1]), "e": np.array([-10]), "k": np.array([-2])}),
    lambda: _model("Pad", [("x", F64, [4, 3])], {"mode": "reflect"},
                   consts={"p": np.array([1, 2, 2, 1])}),
    lambda: _model("ScatterElements", [("x", F64, [4, 3])], {"axis": 1, "reduction": "max"},
                   consts={"i": np.array([[0, 0], [2, 1], [1, 1], [0, 2]]),
                           "u": np.linspace(-1.5, 2.5, 8).reshape(4, 2)}),
    lambda: _model("GatherND", [("x", F64, [4, 3])], consts={"i": np.array([[3, 1], [0, 2]])}),
    lambda: _model("DepthToSpace", [("x", F64, [1, 4, 1, 3])], {"blocksize": 2, "mode": "CRD"}),
], ids=["gather", "slice_neg_step", "pad_reflect", "scatter_max", "gathernd", "depth2space"])
def test_gradient_flows(make):
    shape = (1, 4, 1, 3) if make().graph.node[0].op_type == "DepthToSpace" else (4, 3)
    _grad_ok(make(), shape)


def test_scatter_elements_grad_reaches_updates():
    m = _model("ScatterElements", [("x", F64, [3]), ("u", F64, [2])], {"reduction": "mul"},
               consts={"i": np.array([1, 1])}, order=["x", "i", "u"])
    mod = st.onnx.load(m)
    x = st.tensor([1.0, 2.0, 3.0], requires_grad=True)
    u = st.tensor([4.0, 5.0], requires_grad=True)
    mod(x, u).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), [1.0, 20.0, 1.0])
    np.testing.assert_allclose(to_numpy(u.grad), [10.0, 8.0])


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("model, arrays, match", [
    (_model("Reshape", [("x", F64, [2, 3])], consts={"s": np.array([4, -1])}), [_x(2, 3)],
     r"cannot infer -1 in shape \[4, -1\]"),
    (_model("Reshape", [("x", F64, [2, 3])], consts={"s": np.array([5])}), [_x(2, 3)],
     r"cannot reshape \(2, 3\) to \[5\]"),
    (_model("Slice", [("x", F64, [2, 3])], consts={"s": np.array([0]), "e": np.array([2]),
                                                   "a": np.array([0]), "k": np.array([0])}),
     [_x(2, 3)], "step of axis 0 is 0"),
    (_model("Slice", [("x", F64, [2, 3])], consts={"s": np.array([0]), "e": np.array([2]),
                                                   "a": np.array([2])}),
     [_x(2, 3)], "axes entry 2 is out of range"),
    (_model("Gather", [("x", F64, [2, 3])], consts={"i": np.array([0, 3])}, attrs={"axis": 1}),
     [_x(2, 3)], "index 3 is out of bounds for an axis of size 3"),
    (_model("Squeeze", [("x", F64, [2, 3])], consts={"a": np.array([1])}), [_x(2, 3)],
     "cannot squeeze axis 1 of size 3"),
    (_model("Transpose", [("x", F64, [2, 3])], {"perm": [0, 0]}), [_x(2, 3)],
     r"axes \[0, 0\] repeat an axis"),
    (_model("Split", [("x", F64, [5])], consts={"s": np.array([2, 2])}, n_out=2), [_x(5)],
     r"split sizes \[2, 2\] must be 2 non-negative sizes summing to 5"),
    (_model("Expand", [("x", F64, [2, 3])], consts={"s": np.array([4])}), [_x(2, 3)],
     r"shapes \(2, 3\) and \(4,\) do not broadcast"),
    (_model("Pad", [("x", F64, [2, 3])], {"mode": "mirror"}, consts={"p": np.zeros(4, int)}),
     [_x(2, 3)], "mode 'mirror' is not one of"),
    (_model("Pad", [("x", F64, [2, 3])], consts={"p": np.zeros(3, int)}), [_x(2, 3)],
     "must hold a begin and an end for each of 2 axes"),
    (_model("Pad", [("x", F64, [2, 3])], {"mode": "reflect"},
            consts={"p": np.array([0, 3, 0, 0])}), [_x(2, 3)],
     "reflect pads \\(3, 0\\) need axis 1 longer than 3, got size 3"),
    (_model("Tile", [("x", F64, [2, 3])], consts={"r": np.array([2])}), [_x(2, 3)],
     r"repeats \[2\] must be 2 non-negative counts"),
    (_model("ScatterElements", [("x", F64, [3])], {"reduction": "sub"},
            consts={"i": np.array([0]), "u": np.array([1.0])}), [_x(3)],
     "reduction 'sub' is not supported"),
    (_model("ScatterND", [("x", F64, [3])], consts={"i": np.array([[0]]), "u": np.ones(2)}),
     [_x(3)], r"updates \(2,\) must have shape \(1,\)"),
    (_model("GatherND", [("x", F64, [3])], consts={"i": np.array([[5]])}), [_x(3)],
     r"indices out of range for data \(3,\)"),
    (_model("DepthToSpace", [("x", F64, [1, 3, 1, 1])], {"blocksize": 2}), [_x(1, 3, 1, 1)],
     "channels 3 are not divisible by blocksize"),
    (_model("Concat", [("x", F64, [2, 3]), ("z", F64, [2, 2])], {"axis": 0}),
     [_x(2, 3), _x(2, 2)], r"cannot concatenate shapes \[\(2, 3\), \(2, 2\)\] on axis 0"),
    (_model("EyeLike", [("x", F64, [2])]), [_x(2)], r"input must be 2-d, got shape \(2,\)"),
    (_model("Range", [("a", I64, []), ("b", I64, []), ("c", I64, [])], out_type=I64),
     [np.array(0), np.array(3), np.array(0)], "delta is 0"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_errors_name_the_node(model, arrays, match):
    with pytest.raises(OnnxImportError, match=match) as e:
        _run(model, *arrays)
    assert f"({model.graph.node[0].op_type})" in str(e.value)
