"""Which initializers an imported model trains: weights by how they are used, folded constants
(attention scales, mask templates, shapes) as buffers; `trainable=` overrides the rule."""

from __future__ import annotations

import os

import numpy as np
import pytest

import singa_tensor as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
D, L = 4, 3


def _attention_model():
    """One attention head as exporters write it: the scale folded into a 0-d initializer after
    the score MatMul, a causal template of -inf added before the Softmax, a 0/1 template
    multiplied in, a fill value for Where, a Reshape shape; the weights used by MatMul, Add,
    LayerNormalization and an embedding-like Gather."""
    r = np.random.default_rng(3)
    f32 = np.float32
    inits = {
        "wq": r.standard_normal((D, D)).astype(f32), "wk": r.standard_normal((D, D)).astype(f32),
        "wv_t": r.standard_normal((D, D)).astype(f32), "bq": r.standard_normal(D).astype(f32),
        "ln.weight": np.ones(D, f32), "ln.bias": np.zeros(D, f32),
        "table": r.standard_normal((5, D)).astype(f32),
        "scale": np.array(1 / np.sqrt(D), f32),
        "causal": np.triu(np.full((L, L), -np.inf, f32), 1),
        "keep": np.tril(np.ones((L, L), f32)),
        "fill": np.array([-1e9], f32),
        "pad_mask": np.array([[True, True, False]]),
        "flat": np.array([0, -1], np.int64),
        "perm_idx": np.array([2, 0, 1], np.int64),
    }
    N = helper.make_node
    nodes = [
        N("Gather", ["table", "perm_idx"], ["pos"]),  # (L, D) rows of a learned table
        N("Add", ["x", "pos"], ["xp"]),
        N("LayerNormalization", ["xp", "ln.weight", "ln.bias"], ["h"], axis=-1),
        N("MatMul", ["h", "wq"], ["q0"]),
        N("Add", ["q0", "bq"], ["q"]),
        N("MatMul", ["h", "wk"], ["k"]),
        N("Transpose", ["wv_t"], ["wv"], perm=[1, 0]),
        N("MatMul", ["h", "wv"], ["v"]),
        N("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        N("MatMul", ["q", "kt"], ["s0"]),
        N("Mul", ["s0", "scale"], ["s1"]),
        N("Add", ["s1", "causal"], ["s2"]),
        N("Where", ["pad_mask", "s2", "fill"], ["s3"]),
        N("Softmax", ["s3"], ["p0"], axis=-1),
        N("Mul", ["p0", "keep"], ["p"]),
        N("MatMul", ["p", "v"], ["o"]),
        N("Reshape", ["o", "flat"], ["y"]),
    ]
    g = helper.make_graph(nodes, "attention",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", L, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", L * D])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), inits


WEIGHTS = {"wq", "wk", "wv_t", "bq", "ln.weight", "ln.bias", "table"}
FOLDED = {"scale", "causal", "keep", "fill"}


def _by_onnx_name(m, kind: str) -> dict:
    items = m.named_parameters() if kind == "param" else m.named_buffers()
    inv = {v: k for k, v in m._onnx_names.items()}
    return {inv[name]: t for name, t in items}


def _sgd_steps(m, x, steps: int = 3):
    opt = st.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()


def test_folded_scale_and_masks_stay_constant_while_weights_train():
    model, inits = _attention_model()
    m = st.onnx.load(model)
    params, buffers = _by_onnx_name(m, "param"), _by_onnx_name(m, "buffer")
    assert set(params) == WEIGHTS
    assert FOLDED <= set(buffers)
    before = {k: v.detach().numpy().copy() for k, v in {**params, **buffers}.items()}
    x = st.randn(2, L, D)
    _sgd_steps(m, x)
    for name in WEIGHTS:
        assert not np.array_equal(params[name].detach().numpy(), before[name]), name
    for name in FOLDED:
        np.testing.assert_array_equal(buffers[name].numpy(), before[name], err_msg=name)
        assert not buffers[name].requires_grad


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_pytorch_exports_train_exactly_their_parameters(exporter):
    # the fixture's metadata `learned` lists the initializers holding a torch Parameter
    # (tools/make_onnx_attention_fixtures.py); the rest are buffers and folded constants
    path = os.path.join(DATA, f"onnx_attention_{exporter}.onnx")
    proto = onnx.load(path)
    learned = set(next(p.value for p in proto.metadata_props if p.key == "learned").split(","))
    m = st.onnx.load(path)
    params, buffers = _by_onnx_name(m, "param"), _by_onnx_name(m, "buffer")
    assert set(params) == learned
    floats = {k: v.detach().numpy().copy() for k, v in buffers.items() if v.dtype.is_floating_point}
    assert floats, "the folded scale and masks are float buffers"
    ids = st.tensor([[1, 4, 2, 0, 7, 3], [5, 5, 6, 1, 2, 9]])
    am = st.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    opt = st.optim.SGD(m.parameters(), lr=0.5)
    for _ in range(2):
        opt.zero_grad()
        (m(ids, am) ** 2).mean().backward()
        opt.step()
    for k, v in floats.items():
        np.testing.assert_array_equal(buffers[k].numpy(), v, err_msg=k)


def _names(m) -> set:
    return set(_by_onnx_name(m, "param"))


def test_trainable_true_false_names_and_predicate():
    model, inits = _attention_model()
    floats = {k for k, v in inits.items() if v.dtype.kind == "f"}
    assert _names(st.onnx.load(model, trainable=True)) == floats
    assert _names(st.onnx.load(model, trainable=False)) == set()
    assert _names(st.onnx.load(model, trainable=["scale", "wq"])) == {"scale", "wq"}
    assert _names(st.onnx.load(model, trainable=frozenset({"causal"}))) == {"causal"}
    seen = []

    def two_dims(name, array):
        seen.append((name, type(array)))
        return array.ndim == 2

    got = _names(st.onnx.load(model, trainable=two_dims))
    assert got == {k for k in floats if inits[k].ndim == 2}
    assert sorted(n for n, _ in seen) == sorted(floats)  # asked once per float initializer
    assert all(t is np.ndarray for _, t in seen)


def test_trainable_override_trains_what_it_names():
    model, _ = _attention_model()
    m = st.onnx.load(model, trainable=["scale"])
    before = _by_onnx_name(m, "buffer")["wq"].detach().numpy().copy()
    scale = _by_onnx_name(m, "param")["scale"]
    s0 = scale.detach().numpy().copy()
    _sgd_steps(m, st.randn(2, L, D))
    assert not np.array_equal(scale.detach().numpy(), s0)
    np.testing.assert_array_equal(_by_onnx_name(m, "buffer")["wq"].numpy(), before)


@pytest.mark.parametrize("bad, err, match", [
    ("wq", TypeError, "collection of initializer names"),
    (3, TypeError, "got int"),
    ([1], TypeError, "must be strings"),
    (["nope"], ValueError, r"\['nope'\] are not initializers"),
    (["flat"], ValueError, r"\['flat'\] are not floating point"),
    (lambda name, a: 1, TypeError, "must return a bool, got int"),
])
def test_bad_trainable_values_raise(bad, err, match):
    model, _ = _attention_model()
    with pytest.raises(err, match=match):
        st.onnx.load(model, trainable=bad)


def test_usage_rule_details():
    from singa_tensor.onnx._params import is_template, weight_uses

    f32 = np.float32
    arrays = {"w": np.ones((3, 2), f32), "rs_mean": np.zeros(2, f32),
              "rs_var": np.ones(2, f32), "gamma": np.ones(2, f32), "beta": np.zeros(2, f32),
              "starts": np.array([0.0], f32), "sub_w": np.ones((2, 2), f32)}
    N = helper.make_node
    body = helper.make_graph([N("MatMul", ["a", "sub_w"], ["b"])], "body", [], [])
    g = helper.make_graph([
        N("Cast", ["w"], ["w16"], to=TensorProto.FLOAT),
        N("Reshape", ["w16", "shape"], ["w2"]),  # followed through moves to a weight slot
        N("Gemm", ["x", "w2"], ["h"]),
        N("BatchNormalization", ["h", "gamma", "beta", "rs_mean", "rs_var"], ["y"]),
        N("Pow", ["y", "starts"], ["z"]),  # an exponent is a constant use
        N("If", ["c"], ["o"], then_branch=body, else_branch=body),  # bodies read outer names
    ], "g", [], [])
    assert weight_uses(g, arrays) == {"w", "gamma", "beta", "sub_w"}
    assert is_template(np.array([0.0, -np.inf], f32))
    assert is_template(np.array([0.0, np.finfo(f32).min], f32))
    assert is_template(np.array([[1.0, 0.0], [1.0, 1.0]], f32))
    assert not is_template(np.ones((2, 2), f32))  # a fresh norm weight, not a 0/1 mask
    assert not is_template(np.zeros(4, f32))
    assert not is_template(np.array([0.5, -2.0], f32))
