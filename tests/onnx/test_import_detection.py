"""A detector-like graph with data-dependent shapes: conv backbone, box and score heads, TopK,
NonMaxSuppression, gathers of the surviving boxes, RoiAlign and a small head, built with
onnx.helper and run against onnxruntime on inputs that keep different numbers of boxes (none
included)."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def detector_model(seed: int = 0, opset: int = 17):
    """conv backbone -> box/score heads -> TopK -> NonMaxSuppression -> gather -> RoiAlign ->
    head; the batch, k and the score threshold are inputs, so the number of boxes that
    survive (and every shape after TopK) follows the data."""
    r = np.random.default_rng(seed)
    f32 = np.float32
    inits = {
        "backbone.w": r.standard_normal((8, 3, 3, 3)).astype(f32) * 0.3,
        "backbone.b": r.standard_normal(8).astype(f32) * 0.1,
        "box.w": r.standard_normal((4, 8, 1, 1)).astype(f32) * 0.3,
        "box.b": r.standard_normal(4).astype(f32) * 0.1,
        "score.w": r.standard_normal((1, 8, 1, 1)).astype(f32) * 0.5,
        "score.b": np.zeros(1, f32),
        "head.w": r.standard_normal((32, 5)).astype(f32) * 0.2,
        "head.b": r.standard_normal(5).astype(f32) * 0.1,
        "two": np.array(2.0, f32), "one": np.array(1.0, f32), "four": np.array(4.0, f32),
        "shape_n_4_hw": np.array([0, 4, -1], np.int64),
        "shape_n_hw": np.array([0, -1], np.int64),
        "perm_axis": np.array([-1], np.int64), "axis1": np.array([1], np.int64),
        "lo": np.array([0], np.int64), "mid": np.array([2], np.int64),
        "hi": np.array([4], np.int64),
        "cols_b_box": np.array([0, 2], np.int64), "col_b": np.array(0, np.int64),
        "max_out": np.array([6], np.int64), "iou": np.array([0.3], f32),
    }
    N = helper.make_node
    nodes = [
        N("Conv", ["image", "backbone.w", "backbone.b"], ["c1"], pads=[1, 1, 1, 1]),
        N("Relu", ["c1"], ["feat"]),
        # box head: (N, 4, H*W) -> (N, H*W, 4) corners [x1, y1, x2, y2]
        N("Conv", ["feat", "box.w", "box.b"], ["braw4"]),
        N("Reshape", ["braw4", "shape_n_4_hw"], ["braw3"]),
        N("Transpose", ["braw3"], ["braw"], perm=[0, 2, 1]),
        N("Slice", ["braw", "lo", "mid", "perm_axis"], ["boff"]),
        N("Slice", ["braw", "mid", "hi", "perm_axis"], ["bsize"]),
        N("Tanh", ["boff"], ["toff"]),
        N("Mul", ["toff", "two"], ["off"]),
        N("Add", ["off", "anchors"], ["xy1"]),
        N("Sigmoid", ["bsize"], ["ssize"]),
        N("Mul", ["ssize", "four"], ["size4"]),
        N("Add", ["size4", "one"], ["size"]),
        N("Add", ["xy1", "size"], ["xy2"]),
        N("Concat", ["xy1", "xy2"], ["boxes"], axis=-1),
        # score head: (N, H*W)
        N("Conv", ["feat", "score.w", "score.b"], ["sraw"]),
        N("Sigmoid", ["sraw"], ["sprob"]),
        N("Reshape", ["sprob", "shape_n_hw"], ["scores"]),
        N("TopK", ["scores", "k"], ["top_scores", "top_idx"], axis=1),
        N("Unsqueeze", ["top_idx", "perm_axis"], ["top_idx3"]),
        N("GatherND", ["boxes", "top_idx3"], ["top_boxes"], batch_dims=1),
        N("Unsqueeze", ["top_scores", "axis1"], ["nms_scores"]),
        N("NonMaxSuppression", ["top_boxes", "nms_scores", "max_out", "iou", "score_threshold"],
          ["selected"]),
        N("Gather", ["selected", "cols_b_box"], ["sel_bk"], axis=1),
        N("GatherND", ["top_boxes", "sel_bk"], ["rois"]),
        N("Gather", ["selected", "col_b"], ["roi_batch"], axis=1),
        N("RoiAlign", ["feat", "rois", "roi_batch"], ["pooled"], output_height=2,
          output_width=2, sampling_ratio=2, spatial_scale=1.0),
        N("Flatten", ["pooled"], ["pflat"]),
        N("Gemm", ["pflat", "head.w", "head.b"], ["logits"]),
    ]
    # one anchor per pixel of the 8x8 map, at its (x, y)
    ys, xs = np.meshgrid(np.arange(8, dtype=f32), np.arange(8, dtype=f32), indexing="ij")
    inits["anchors"] = np.stack([xs.reshape(-1), ys.reshape(-1)], -1)
    graph = helper.make_graph(
        nodes, "detector",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 3, 8, 8]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("score_threshold", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["s", 3]),
         helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["s", 4]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["s", 5])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


# (batch, k, score threshold, seed): from every box kept to none
CASES = [(1, 10, 0.3, 1), (2, 20, 0.5, 2), (2, 64, 0.0, 3), (3, 7, 0.6, 4), (1, 5, 0.99999, 5),
         (2, 1, 0.0, 6)]


def _feeds(n, k, thr, seed):
    x = np.random.default_rng(seed).standard_normal((n, 3, 8, 8)).astype(np.float32)
    return {"image": x, "k": np.array([k], np.int64),
            "score_threshold": np.array([thr], np.float32)}


@pytest.fixture(scope="module")
def model():
    m = detector_model()
    onnx.checker.check_model(m, full_check=True)
    return m


def _compare(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_detector_matches_onnxruntime_for_any_number_of_boxes(model):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    m = st.onnx.load(model)
    rep = st.onnx.prepare(model)
    counts = set()
    for case in CASES:
        feeds = _feeds(*case)
        want = sess.run(None, feeds)
        counts.add(want[0].shape[0])
        ordered = [feeds[n] for n in ("image", "k", "score_threshold")]
        _compare(m.run_numpy(ordered), want)  # the inference path, twice per signature
        _compare(m.run_numpy(ordered), want)
        _compare(rep.run(ordered), want)
    assert 0 in counts and len(counts) >= 4, counts  # the cases keep different numbers


def test_detector_plain_plan_and_gradients_reach_the_backbone(model):
    m = st.onnx.load(model)
    m.fast = False
    feeds = _feeds(2, 20, 0.5, 2)
    image = st.tensor(feeds["image"])
    sel, rois, logits = m(image, st.tensor(feeds["k"]), st.tensor(feeds["score_threshold"]))
    assert logits.shape[0] == sel.shape[0] > 0
    logits.sum().backward()
    params = dict(m.named_parameters())
    assert params["backbone_w"].grad is not None
    assert float(np.abs(params["head_w"].grad.numpy()).sum()) > 0
    empty = m(image, st.tensor(feeds["k"]), st.tensor(np.array([0.99999], np.float32)))
    assert [tuple(t.shape) for t in empty] == [(0, 3), (0, 4), (0, 5)]
