"""st.onnx.load / prepare: reading models, parameters, cutting graphs, dtypes and bad input."""

from __future__ import annotations

import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

from ..helpers import to_numpy  # noqa: E402


def _vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _mlp_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "fc.weight")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "fc.bias")
    nodes = [helper.make_node("MatMul", ["x", "fc.weight"], ["h"]),
             helper.make_node("Add", ["h", "fc.bias"], ["z"]),
             helper.make_node("Relu", ["z"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [_vi("x", shape=[None, 3])], [_vi("y", shape=[None, 4])],
                          [w, b])
    return helper.make_model(g), numpy_helper.to_array(w), numpy_helper.to_array(b)


def test_initializers_become_parameters_and_gradients_flow():
    model, w, b = _mlp_model()
    m = st.onnx.load(model)
    names = dict(m.named_parameters())
    assert sorted(names) == ["fc_bias", "fc_weight"]
    np.testing.assert_array_equal(to_numpy(names["fc_weight"]), w)
    x = np.array([[1.0, -2.0, 0.5], [0.3, 0.1, -1.0]], np.float32)
    y = m(st.tensor(x))
    np.testing.assert_allclose(to_numpy(y), np.maximum(x @ w + b, 0), rtol=1e-6)
    y.sum().backward()
    mask = (x @ w + b > 0).astype(np.float32)
    np.testing.assert_allclose(to_numpy(names["fc_weight"].grad), x.T @ mask, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(names["fc_bias"].grad), mask.sum(0), rtol=1e-6)


def test_repr_describes_the_graph():
    model, _, _ = _mlp_model()
    model.opset_import.append(helper.make_opsetid("com.example", 2))
    assert repr(st.onnx.load(model)) == (
        "OnnxModule(graph='mlp', inputs=['x'], outputs=['y'], nodes=3 (MatMul 1, Add 1, "
        "Relu 1), opset " + str(model.opset_import[0].version) + ", com.example 2, "
        "parameters=16)")


def test_load_from_path_bytes_and_file_object(tmp_path):
    model, w, b = _mlp_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.ones((1, 3), np.float32)
    want = np.maximum(x @ w + b, 0)
    for src in (str(path), path.read_bytes(), io.BytesIO(path.read_bytes())):
        got = to_numpy(st.onnx.load(src)(st.tensor(x)))
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_state_dict_round_trip_changes_the_output():
    model, w, b = _mlp_model()
    m = st.onnx.load(model)
    sd = m.state_dict()
    sd["fc_bias"] = st.tensor(np.full(4, 100.0, np.float32))
    m.load_state_dict(sd)
    y = to_numpy(m(st.zeros(1, 3)))
    np.testing.assert_allclose(y, np.full((1, 4), 100.0), rtol=1e-6)


def test_cut_at_an_inner_output():
    model, w, b = _mlp_model()
    m = st.onnx.load(model, outputs=["h"])
    x = np.array([[1.0, -2.0, 0.5]], np.float32)
    np.testing.assert_allclose(to_numpy(m(st.tensor(x))), x @ w, rtol=1e-6)
    assert m.output_names == ["h"]
    with pytest.raises(OnnxImportError, match="no value named 'nope'"):
        st.onnx.load(model, outputs=["nope"])


def test_prepare_run_returns_declared_dtypes():
    # uint8 in, uint8 out: computed in int64, cast back to the declared type
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g",
                          [_vi("a", TensorProto.UINT8, [3]), _vi("b", TensorProto.UINT8, [3])],
                          [_vi("c", TensorProto.UINT8, [3])])
    rep = st.onnx.prepare(helper.make_model(g))
    out = rep.run([np.array([1, 2, 3], np.uint8), np.array([4, 5, 6], np.uint8)])
    assert out[0].dtype == np.uint8
    np.testing.assert_array_equal(out[0], [5, 7, 9])
    out = rep.run({"a": np.array([1, 1, 1], np.uint8), "b": np.array([0, 1, 2], np.uint8)})
    np.testing.assert_array_equal(out[0], [1, 2, 3])


def test_unsupported_op_names_the_node():
    g = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")], "g",
                          [_vi("x", shape=[1])], [_vi("y", shape=[1])])
    with pytest.raises(OnnxImportError, match="node 'mystery': op 'NoSuchOp' is not supported"):
        st.onnx.load(helper.make_model(g))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], domain="com.example")], "g",
                          [_vi("x", shape=[1])], [_vi("y", shape=[1])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid("com.example", 1)])
    with pytest.raises(OnnxImportError, match="domain 'com.example'"):
        st.onnx.load(model)


def test_malformed_files_raise(tmp_path):
    with pytest.raises(OnnxImportError, match="not an ONNX model"):
        st.onnx.load(b"\x00\x01garbage\xff" * 7)
    with pytest.raises(OnnxImportError, match="cannot read"):
        st.onnx.load(str(tmp_path / "missing.onnx"))
    with pytest.raises(OnnxImportError, match="empty"):
        st.onnx.load(b"")
    # a node reading a value that nothing produces
    g = helper.make_graph([helper.make_node("Relu", ["ghost"], ["y"], name="r")], "g",
                          [_vi("x", shape=[1])], [_vi("y", shape=[1])])
    with pytest.raises(OnnxImportError, match="input 'ghost' is not produced"):
        st.onnx.load(helper.make_model(g))


def test_wrong_number_of_inputs():
    model, _, _ = _mlp_model()
    m = st.onnx.load(model)
    with pytest.raises(OnnxImportError, match=r"expected 1 inputs \(x\), got 2"):
        m(st.ones(1, 3), st.ones(1, 3))


def test_string_initializers_are_host_values():
    # strings are host numpy arrays of str: neither parameters nor buffers
    t = helper.make_tensor("s", TensorProto.STRING, [2], [b"a", "\u00e9".encode()])
    g = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g", [],
                          [_vi("y", TensorProto.STRING, [2])], [t])
    m = st.onnx.load(helper.make_model(g))
    (y,) = m.run_numpy([])
    assert y.dtype == object and y.tolist() == ["a", "\u00e9"]
    assert list(m.state_dict()) == []
    # a tensor op fed a string value names the node
    g = helper.make_graph([helper.make_node("Relu", ["s"], ["y"], name="r")], "g", [],
                          [_vi("y", TensorProto.STRING, [2])], [t])
    with pytest.raises(OnnxImportError, match=r"node 'r' \(Relu\): string tensors are not "
                                              r"supported by this op"):
        st.onnx.load(helper.make_model(g)).run_numpy([])


def test_backend_devices():
    from singa_tensor.onnx import Backend

    assert Backend.supports_device("CPU")
    assert Backend.supports_device("CUDA") == st.cuda.is_available()
    model, _, _ = _mlp_model()
    with pytest.raises(ValueError, match="unknown device 'TPU'"):
        st.onnx.prepare(model, device="TPU")


def test_batch_norm_statistics_are_buffers_not_parameters():
    c = 2
    inits = [numpy_helper.from_array(np.full(c, v, np.float32), n)
             for n, v in (("scale", 1.5), ("bias", 0.5), ("mean", 0.25), ("var", 4.0))]
    g = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"])],
        "bn", [_vi("x", shape=[None, c])], [_vi("y", shape=[None, c])], inits)
    m = st.onnx.load(helper.make_model(g))
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "scale"]
    assert sorted(n for n, _ in m.named_buffers()) == ["mean", "var"]
    x = np.array([[1.0, -1.0]], np.float32)
    want = (x - 0.25) / np.sqrt(4.0 + 1e-5) * 1.5 + 0.5
    np.testing.assert_allclose(to_numpy(m(st.tensor(x))), want, rtol=1e-6)
