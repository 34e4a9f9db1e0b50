"""The ai.onnx.ml LabelEncoder and TreeEnsemble (onnx/ops_ml.py): the forms the conformance
suite misses, random ensembles against onnx's reference evaluator, and the error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import singa_tensor as st  # noqa: E402
from singa_tensor.onnx import OnnxImportError  # noqa: E402

S, F, D, I64 = TensorProto.STRING, TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
ML = "ai.onnx.ml"


def ml_model(node, elem_in, elem_out, ml_opset):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem_in, None)],
                          [helper.make_tensor_value_info("y", elem_out, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                               helper.make_opsetid(ML, ml_opset)])


def encode(x, elem_in, elem_out, ml_opset=4, **attrs):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, **attrs)
    return st.onnx.load(ml_model(node, elem_in, elem_out, ml_opset)).run_numpy([x])[0]


# ---- LabelEncoder --------------------------------------------------------------------------------


def test_label_encoder_maps_every_direction():
    y = encode(np.array([2, 7, 5], np.int64), I64, S, keys_int64s=[5, 2],
               values_strings=["five", "two"], default_string="?")
    assert y.tolist() == ["two", "?", "five"]
    y = encode(np.array([0.5, np.nan, 1.0], np.float32), F, I64, keys_floats=[0.5, np.nan],
               values_int64s=[1, 9])
    assert y.tolist() == [1, 9, -1]  # a NaN key matches NaN, the default is -1
    y = encode(np.array(["b", "x"], dtype=object), S, F, keys_strings=["b"], values_floats=[0.25])
    assert y.dtype == np.float32 and y[0] == 0.25 and math.copysign(1, y[1]) == -1  # -0.0
    keys = numpy_helper.from_array(np.array([3, 4], np.int32), "keys_tensor")
    vals = numpy_helper.from_array(np.array([1.5, 2.5]), "values_tensor")
    y = encode(np.array([[4, 3], [0, 4]], np.int32), TensorProto.INT32, D, keys_tensor=keys,
               values_tensor=vals)
    assert y.dtype == np.float64 and y.tolist() == [[2.5, 1.5], [-0.0, 2.5]]


def test_label_encoder_opset1_classes():
    x = np.array(["b", "q", "a"], dtype=object)
    y = encode(x, S, I64, ml_opset=1, classes_strings=["a", "b"])
    assert y.tolist() == [1, -1, 0]
    y = encode(np.array([1, 5], np.int64), I64, S, ml_opset=1, classes_strings=["a", "b"],
               default_string="none")
    assert y.tolist() == ["b", "none"]


def test_label_encoder_errors():
    x = np.array(["a"], dtype=object)
    with pytest.raises(OnnxImportError, match=r"\(LabelEncoder\): 2 keys but 1 values"):
        encode(x, S, I64, keys_strings=["a", "b"], values_int64s=[1])
    with pytest.raises(OnnxImportError, match=r"needs exactly one of keys_strings, keys_int64s, "
                                              r"keys_floats or keys_tensor, got \['keys_strings', "
                                              r"'keys_int64s'\]"):
        encode(x, S, I64, keys_strings=["a"], keys_int64s=[1], values_int64s=[1])
    with pytest.raises(OnnxImportError, match=r"the keys are strings, the input holds floats"):
        encode(np.ones(1, np.float32), F, I64, keys_strings=["a"], values_int64s=[1])
    with pytest.raises(OnnxImportError, match=r"default_tensor must hold one value, got 2"):
        encode(x, S, I64, keys_strings=["a"], values_int64s=[1],
               default_tensor=numpy_helper.from_array(np.array([1, 2], np.int64), "d"))


# ---- TreeEnsemble --------------------------------------------------------------------------------


def _random_ensemble(rng, n_trees, depth, n_feat, n_targets, dtype):
    """Complete trees of the given depth, random modes (BRANCH_MEMBER included), features,
    splits, NaN handling and leaf targets, as TreeEnsemble attributes. The nodes are numbered
    depth first, true branch first, the order in which onnx's reference evaluator reads the
    sets of membership_values (the spec's order is that of nodes_modes: the same here), and
    no set holds 0.0, which that evaluator takes for the end of a set."""
    a = {k: [] for k in ("modes", "feats", "splits", "t_ids", "f_ids", "t_leaf", "f_leaf",
                         "tracks", "targets", "weights", "roots")}
    members = []

    def leaf():
        a["targets"].append(int(rng.integers(0, n_targets)))
        a["weights"].append(float(rng.normal()))
        return len(a["targets"]) - 1, 1

    def inner(d):
        i = len(a["modes"])
        mode = int(rng.integers(0, 7))
        a["modes"].append(mode)
        a["feats"].append(int(rng.integers(0, n_feat)))
        a["splits"].append(float(rng.choice([-0.5, 0.0, 0.5, 1.0])))
        a["tracks"].append(int(rng.integers(0, 2)))
        if mode == 6:
            members.extend(float(v) for v in rng.choice([-1.0, 0.5, 1.0, 2.0], 2))
            members.append(np.nan)
        for side in ("t", "f"):
            a[f"{side}_ids"].append(None)
            a[f"{side}_leaf"].append(None)
        for side in ("t", "f"):
            kid, is_leaf = leaf() if d == 1 else (inner(d - 1), 0)
            a[f"{side}_ids"][i], a[f"{side}_leaf"][i] = kid, is_leaf
        return i

    for _ in range(n_trees):
        a["roots"].append(inner(depth))
    t = {F: np.float32, D: np.float64}
    attrs = dict(
        n_targets=n_targets, tree_roots=a["roots"], nodes_featureids=a["feats"],
        nodes_modes=numpy_helper.from_array(np.array(a["modes"], np.uint8), "nodes_modes"),
        nodes_splits=numpy_helper.from_array(np.array(a["splits"], t[dtype]), "nodes_splits"),
        nodes_truenodeids=a["t_ids"], nodes_falsenodeids=a["f_ids"],
        nodes_trueleafs=a["t_leaf"], nodes_falseleafs=a["f_leaf"],
        nodes_missing_value_tracks_true=a["tracks"], leaf_targetids=a["targets"],
        leaf_weights=numpy_helper.from_array(np.array(a["weights"], t[dtype]), "leaf_weights"))
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, t[dtype]), "mv")
    return attrs


def _tree_model(elem, **attrs):
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain=ML, **attrs)
    return ml_model(node, elem, elem, 5)


@pytest.mark.parametrize("elem", [F, D])
@pytest.mark.parametrize("agg", [0, 1, 2, 3])
def test_tree_ensemble_matches_the_reference_evaluator(elem, agg):
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(agg + 10 * elem)
    # one target for MIN and MAX: the reference starts untouched targets at the type's extremes
    n_targets = 3 if agg < 2 else 1
    attrs = _random_ensemble(rng, n_trees=4, depth=3, n_feat=3, n_targets=n_targets,
                             dtype=elem)
    m = _tree_model(elem, aggregate_function=agg, **attrs)
    npt = np.float32 if elem == F else np.float64
    x = rng.choice([-1.0, 0.0, 0.25, 0.5, 1.0, 2.0, np.nan], size=(40, 3)).astype(npt)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = st.onnx.load(m).run_numpy([x])
    assert got.dtype == npt and got.shape == (40, n_targets)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _stump(**extra):
    """One tree: x0 <= 0 ? leaf 0 (target 0, weight 1) : leaf 1 (target 1, weight 2)."""
    attrs = dict(n_targets=2, tree_roots=[0], nodes_featureids=[0],
                 nodes_modes=numpy_helper.from_array(np.array([0], np.uint8), "m"),
                 nodes_splits=numpy_helper.from_array(np.array([0.0]), "s"),
                 nodes_truenodeids=[0], nodes_falsenodeids=[1], nodes_trueleafs=[1],
                 nodes_falseleafs=[1], leaf_targetids=[0, 1],
                 leaf_weights=numpy_helper.from_array(np.array([1.0, 2.0]), "w"))
    attrs.update(extra)
    return attrs


def test_tree_ensemble_post_transforms():
    x = np.array([[-1.0], [1.0]])
    raw = st.onnx.load(_tree_model(D, **_stump())).run_numpy([x])[0]
    assert raw.tolist() == [[1.0, 0.0], [0.0, 2.0]]

    def post(k):
        return st.onnx.load(_tree_model(D, **_stump(post_transform=k))).run_numpy([x])[0]

    e = np.exp(raw - raw.max(1, keepdims=True))
    np.testing.assert_allclose(post(1), e / e.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(post(2), 1 / (1 + np.exp(-raw)), rtol=1e-12)
    assert post(3).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # zeros take no share
    probit = st.onnx.load(_tree_model(D, **_stump(
        post_transform=4, leaf_weights=numpy_helper.from_array(np.array([0.975, 0.5]), "w"))))
    (y,) = probit.run_numpy([np.array([[-1.0], [1.0]])])
    np.testing.assert_allclose(y[:, 0], [1.959963984540054, -np.inf], rtol=1e-9)
    np.testing.assert_allclose(y[:, 1], [-np.inf, 0.0], atol=1e-12)


def test_tree_ensemble_single_leaf_tree_and_float16():
    attrs = _stump(nodes_truenodeids=[1], nodes_falsenodeids=[1])  # the root is leaf 1
    m = _tree_model(TensorProto.FLOAT16, **attrs)
    y = st.onnx.load(m).run_numpy([np.array([[-5.0], [5.0]], np.float16)])[0]
    assert y.dtype == np.float16 and y.tolist() == [[0.0, 2.0], [0.0, 2.0]]


def test_tree_ensemble_errors():
    x = np.zeros((1, 1))

    def fails(match, x=x, **extra):
        with pytest.raises(OnnxImportError, match=match):
            st.onnx.load(_tree_model(D, **_stump(**extra))).run_numpy([x])

    fails(r"\(TreeEnsemble\): X must be a 2-d float tensor \[N, features\], got float64 of "
          r"shape \[1\]", x=np.zeros(1))
    fails(r"n_targets must be a positive int, got 0", n_targets=0)
    fails(r"nodes_featureids entry 3 is out of range", nodes_featureids=[3])
    fails(r"leaf_targetids entry 2 is out of range", leaf_targetids=[0, 2])
    fails(r"nodes_falsenodeids entry 5 is out of range", nodes_falsenodeids=[5])
    fails(r"the nodes_\* attributes must all have one entry per node", nodes_featureids=[0, 0])
    fails(r"BRANCH_MEMBER nodes need the membership_values attribute",
          nodes_modes=numpy_helper.from_array(np.array([6], np.uint8), "m"))
    fails(r"membership_values holds 2 NaN-terminated sets for 1 BRANCH_MEMBER nodes",
          nodes_modes=numpy_helper.from_array(np.array([6], np.uint8), "m"),
          membership_values=numpy_helper.from_array(np.array([1.0, np.nan, np.nan]), "v"))
    fails(r"aggregate_function must be 0 to 3", aggregate_function=7)
    fails(r"post_transform must be 0 to 4", post_transform=9)
    fails(r"attribute 'tree_roots' is required", tree_roots=None)
    # a node that points back at itself
    fails(r"the tree at root 0 has a cycle", nodes_trueleafs=[0], nodes_truenodeids=[0])
