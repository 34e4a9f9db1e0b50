"""st.onnx.load refuses what a model must not do: external data from outside its folder, and
graphs that break ONNX's structural rules (checked at load, not on first call)."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402


def _vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


# ---- external data ---------------------------------------------------------------------------

def _external_model(location: str, weights: np.ndarray):
    """y = x + w with w stored externally at location (no data inside the model)."""
    w = numpy_helper.from_array(weights, "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(weights.nbytes))):
        e = w.external_data.add()
        e.key, e.value = k, v
    return _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", shape=[3])],
                  [_vi("y", shape=[3])], [w])


def test_external_data_is_read_from_the_models_folder_not_the_current_one(tmp_path,
                                                                         monkeypatch):
    good = np.array([1.0, 2.0, 3.0], np.float32)
    decoy = np.array([-7.0, -7.0, -7.0], np.float32)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "w.bin").write_bytes(good.tobytes())
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "w.bin").write_bytes(decoy.tobytes())
    path = model_dir / "m.onnx"
    path.write_bytes(_external_model("w.bin", good).SerializeToString())
    monkeypatch.chdir(other)
    m = st.onnx.load(str(path))
    np.testing.assert_array_equal(m(st.zeros(3)).detach().numpy(), good)
    # from a file object with a path, and from bytes with base_dir
    with open(path, "rb") as fh:
        np.testing.assert_array_equal(st.onnx.load(fh)(st.zeros(3)).detach().numpy(), good)
    m = st.onnx.load(path.read_bytes(), base_dir=str(model_dir))
    np.testing.assert_array_equal(m(st.zeros(3)).detach().numpy(), good)


def test_external_data_from_bytes_needs_a_base_dir(tmp_path):
    data = _external_model("w.bin", np.zeros(3, np.float32))
    with pytest.raises(OnnxImportError, match="pass base_dir"):
        st.onnx.load(data.SerializeToString())
    with pytest.raises(OnnxImportError, match="pass base_dir"):
        st.onnx.load(data)
    with pytest.raises(OnnxImportError, match="is not a folder"):
        st.onnx.load(data, base_dir=str(tmp_path / "nope"))


def test_a_model_proto_is_not_changed_by_loading_its_external_data(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.ones(3, np.float32).tobytes())
    proto = _external_model("w.bin", np.ones(3, np.float32))
    before = proto.SerializeToString()
    st.onnx.load(proto, base_dir=str(tmp_path))
    assert proto.SerializeToString() == before


@pytest.mark.parametrize("where", ["absolute", "dotdot", "symlink"])
def test_external_data_outside_the_models_folder_is_refused(tmp_path, where):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.full(3, 42.0, np.float32).tobytes())
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    if where == "absolute":
        loc, match = str(secret), "absolute path"
    elif where == "dotdot":
        loc, match = "../secret.bin", r"'\.\.' is not allowed"
    else:
        os.symlink(secret, model_dir / "link.bin")
        loc, match = "link.bin", "outside the model's folder"
    path = model_dir / "m.onnx"
    path.write_bytes(_external_model(loc, np.zeros(3, np.float32)).SerializeToString())
    with pytest.raises(OnnxImportError, match=match):
        st.onnx.load(str(path))


def test_external_data_shorter_than_declared_is_refused(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\x00" * 4)
    path = tmp_path / "m.onnx"
    path.write_bytes(_external_model("w.bin", np.zeros(3, np.float32)).SerializeToString())
    with pytest.raises(OnnxImportError, match="holds 4 bytes"):
        st.onnx.load(str(path))
    path.write_bytes(_external_model("missing.bin", np.zeros(3, np.float32))
                     .SerializeToString())
    with pytest.raises(OnnxImportError, match="cannot read external data"):
        st.onnx.load(str(path))


# ---- structure -------------------------------------------------------------------------------

def test_two_nodes_writing_one_value_are_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"),
             helper.make_node("Neg", ["x"], ["y"], name="b")]
    with pytest.raises(OnnxImportError, match="node 'b'.*output 'y' is already written by "
                                              "node 'a'"):
        st.onnx.load(_model(nodes, [_vi("x", shape=[1])], [_vi("y", shape=[1])]))
    # a node overwriting a graph input or an initializer
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="c")]
    with pytest.raises(OnnxImportError, match="output 'x' is already a graph input"):
        st.onnx.load(_model(nodes, [_vi("x", shape=[1])], [_vi("x", shape=[1])]))
    w = numpy_helper.from_array(np.ones(1, np.float32), "w")
    nodes = [helper.make_node("Relu", ["x"], ["w"], name="d")]
    with pytest.raises(OnnxImportError, match="output 'w' is already an initializer"):
        st.onnx.load(_model(nodes, [_vi("x", shape=[1])], [_vi("w", shape=[1])], [w]))


def test_unknown_opsets_are_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(OnnxImportError, match="opset 99 of domain 'ai.onnx' is not a known"):
        st.onnx.load(_model(nodes, [_vi("x", shape=[1])], [_vi("y", shape=[1])], opset=99))
    with pytest.raises(OnnxImportError, match="opset 0 of domain"):
        st.onnx.load(_model(nodes, [_vi("x", shape=[1])], [_vi("y", shape=[1])], opset=0))


def test_an_op_below_the_opset_where_it_exists_is_refused():
    nodes = [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln")]
    s = numpy_helper.from_array(np.ones(2, np.float32), "s")
    model = _model(nodes, [_vi("x", shape=[1, 2])], [_vi("y", shape=[1, 2])], [s], opset=1)
    with pytest.raises(OnnxImportError, match="does not exist at opset 1 .*first appears at "
                                              "opset 17"):
        st.onnx.load(model)
    # at its opset it loads and runs
    ok = _model(nodes, [_vi("x", shape=[1, 2])], [_vi("y", shape=[1, 2])], [s], opset=17)
    np.testing.assert_allclose(st.onnx.load(ok)(st.tensor([[1.0, 3.0]])).detach().numpy(),
                               [[-1.0, 1.0]], atol=1e-3)


def test_attributes_of_the_wrong_type_are_refused():
    node = helper.make_node("Transpose", ["x"], ["y"], name="t")
    node.attribute.append(helper.make_attribute("perm", [1.0, 0.0]))
    with pytest.raises(OnnxImportError, match="attribute 'perm' must be INTS, got FLOATS"):
        st.onnx.load(_model([node], [_vi("x", shape=[2, 3])], [_vi("y", shape=[3, 2])]))


def test_cycles_and_unsorted_graphs_are_refused_at_load():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="first"),
             helper.make_node("Neg", ["a"], ["b"], name="second")]
    with pytest.raises(OnnxImportError, match="input 'b' is produced by a later node "
                                              r"\('second'\).*cycle"):
        st.onnx.load(_model(nodes, [_vi("x", shape=[1])], [_vi("b", shape=[1])]))


def test_subgraphs_see_outer_names_and_are_checked_too():
    then_ok = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                                [_vi("t", shape=[1])])
    else_bad = helper.make_graph([helper.make_node("Relu", ["ghost"], ["e"], name="inner")],
                                 "else", [], [_vi("e", shape=[1])])
    cond = helper.make_node("If", ["c"], ["y"], then_branch=then_ok, else_branch=then_ok)
    inputs = [_vi("c", TensorProto.BOOL, []), _vi("x", shape=[1])]
    m = st.onnx.load(_model([cond], inputs, [_vi("y", shape=[1])]))
    assert m(st.tensor(True), st.ones(1)).tolist() == [-1.0]
    cond = helper.make_node("If", ["c"], ["y"], then_branch=then_ok, else_branch=else_bad)
    with pytest.raises(OnnxImportError, match="node 'inner'.*'ghost' is not produced.*subgraph "
                                              "'else_branch'"):
        st.onnx.load(_model([cond], inputs, [_vi("y", shape=[1])]))


def test_an_input_of_the_wrong_kind_is_refused():
    m = st.onnx.load(_model([helper.make_node("Identity", ["s"], ["y"])],
                            [_vi("s", TensorProto.STRING, [1])],
                            [_vi("y", TensorProto.STRING, [1])]))
    with pytest.raises(OnnxImportError, match="input 's' is declared STRING"):
        m(st.ones(1))
    m = st.onnx.load(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", shape=[2])],
                            [_vi("y", shape=[2])]))
    with pytest.raises(OnnxImportError, match="input 'x' is declared FLOAT .*int64"):
        m(st.tensor([1, 2]))
    # a float64 array for a float input is converted, as before
    assert m(np.array([-1.0, 2.0])).tolist() == [0.0, 2.0]


# ---- Resize and MaxPool ----------------------------------------------------------------------

def test_resize_with_huge_scales_fails_fast():
    import time

    scales = numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "s")
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", name="up")
    m = st.onnx.load(_model([node], [_vi("x", shape=[1, 1, 4, 4])], [_vi("y")], [scales],
                            opset=13))
    t0 = time.perf_counter()
    with pytest.raises(OnnxImportError, match="node 'up' \\(Resize\\): output shape .* GiB"):
        m(st.ones(1, 1, 4, 4))
    assert time.perf_counter() - t0 < 30  # a guard against the old minutes-long loop only


@pytest.mark.parametrize("op,attrs", [("MaxPool", {"kernel_shape": [2, 2]}),
                                      ("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}),
                                      ("MaxPool", {"kernel_shape": [3], "strides": [1]}),
                                      ("GlobalMaxPool", {})])
def test_tied_maxima_give_the_gradient_to_the_first(op, attrs):
    one_d = attrs.get("kernel_shape") == [3]
    shape = [1, 1, 4] if one_d else [1, 1, 2, 2]
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    m = st.onnx.load(_model([node], [_vi("x", shape=shape)], [_vi("y")]))
    x = st.full(shape, 5.0, requires_grad=True)
    m(x).sum().backward()
    # the reference: nn's pools, which give each window's gradient to its first maximum
    ref = st.full(shape, 5.0, requires_grad=True)
    if op == "GlobalMaxPool":
        st.nn.functional.adaptive_max_pool2d(ref, 1).sum().backward()
    elif one_d:
        st.nn.functional.max_pool1d(ref, 3, 1).sum().backward()
    elif attrs.get("pads"):
        st.nn.functional.max_pool2d(st.nn.functional.pad(ref, (1, 0, 1, 0),
                                                         value=-np.inf), 2, 1).sum().backward()
    else:
        st.nn.functional.max_pool2d(ref, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), ref.grad.numpy())
    assert x.grad.numpy().max() >= 1.0  # whole units, not an even share


def test_the_first_opset_of_an_op_with_several_versions_is_named():
    # Mish has versions at opsets 18 and 22: the message names the first, not the newest
    node = helper.make_node("Mish", ["x"], ["y"], name="m")
    model = _model([node], [_vi("x", shape=[2])], [_vi("y", shape=[2])], opset=17)
    with pytest.raises(OnnxImportError, match="does not exist at opset 17 .*first appears at "
                                              "opset 18"):
        st.onnx.load(model)
