"""ONNX import handler for FlexAttention (domain ai.onnx.preview): scaled dot-product attention
whose scores and probabilities pass through user subgraphs (score_mod, prob_mod).

The subgraphs run as ordinary imported graphs on the score tensor, so masks, biases and soft
caps written in ONNX are differentiable like the rest of the model.
"""

from __future__ import annotations

import math

from .. import dtype as _dt
from ..ops.linalg import matmul
from ._graph import st_dtype
from ._handlers import handler

_HALF = (_dt.float16, _dt.bfloat16)


def _modify(node, graph, value, dtype, what: str):
    """value run through the one-input, one-output subgraph attribute graph (None: unchanged)."""
    if graph is None:
        return value
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise node.fail(f"{what} must have exactly 1 input and 1 output, got "
                        f"{len(graph.input)} and {len(graph.output)}")
    (out,) = node.run_subgraph(graph, [value], node.env)
    if tuple(out.shape) != tuple(value.shape):
        raise node.fail(f"{what} changed the shape {value.shape} to {out.shape}")
    return out.to(dtype)


@handler("ai.onnx.preview::FlexAttention")
def flex_attention(node, inputs, attrs):
    if len(inputs) != 3 or any(v is None for v in inputs):
        raise node.fail("expects inputs Q, K and V")
    q, k, v = inputs
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise node.fail(f"Q, K and V must be 4-D (batch, heads, seq, head_size), got {q.shape}, "
                        f"{k.shape}, {v.shape}")
    batch, q_heads, _, head = q.shape
    kv_heads, n_kv = k.shape[1], k.shape[2]
    if k.shape[0] != batch or v.shape[0] != batch or k.shape[3] != head \
            or v.shape[1:3] != (kv_heads, n_kv):
        raise node.fail(f"K {k.shape} and V {v.shape} do not match Q {q.shape}")
    if q_heads != kv_heads:
        if q_heads % kv_heads:
            raise node.fail(f"{q_heads} query heads are not a multiple of {kv_heads} kv heads")
        reps = q_heads // kv_heads  # each kv head serves `reps` consecutive query heads
        k = k.unsqueeze(2).expand(batch, kv_heads, reps, n_kv, head).reshape(
            batch, q_heads, n_kv, head)
        v = v.unsqueeze(2).expand(batch, kv_heads, reps, n_kv, v.shape[3]).reshape(
            batch, q_heads, n_kv, v.shape[3])
    scale = attrs.get("scale")
    # Q and K are each scaled by sqrt(scale), which keeps float16 scores in range
    root = math.sqrt(scale if scale is not None else 1.0 / math.sqrt(head))
    scores = matmul(q * root, k.transpose(2, 3) * root)
    precision = attrs.get("softmax_precision")
    if precision is not None:
        work = st_dtype(precision, node.name)
        if not work.is_floating_point:
            raise node.fail(f"softmax_precision {precision} is not a float type")
    else:
        work = _dt.float32 if q.dtype in _HALF else q.dtype
    scores = _modify(node, attrs.get("score_mod"), scores.to(work), work, "score_mod")
    probs = scores.softmax(-1)
    probs = _modify(node, attrs.get("prob_mod"), probs, work, "prob_mod")
    return matmul(probs, v.to(work)).to(inputs[2].dtype)
