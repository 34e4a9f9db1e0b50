"""Fused scaled dot-product attention: softmax(q k^T * scale) v without the (L, S) scores.

The kernels (header: "Scaled dot-product attention, fused") take the keys a block at a time
with an online softmax, so memory grows with L * Ev, not L * S, and keep each row's
log-sum-exp for the backward, which recomputes the probabilities blockwise. Under create_graph
the backward is written with Tensor ops instead (the gradient of the composition), so the op
differentiates twice. `scaled_dot_product_attention` dispatches here when no mask and no
dropout are asked for (see `use_fused`).

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.ops.attention_fused import scaled_dot_product_attention_fused
    >>> q = k = v = st.ones(2, 3, 4)
    >>> scaled_dot_product_attention_fused(q, k, v, is_causal=True).tolist()[0][2]
    [1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

import math

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import OpSpec, apply, check_same_device, contiguous, kernel, ptr, register
from .elementwise import mul, sub, where
from .layout import cast, transpose
from .linalg import matmul
from .reduce import sum as _sum
from .reduce_ext import softmax

__all__: list[str] = []

# the largest E and Ev the kernels take (the CUDA kernel keeps a row's 256 columns in registers)
MAX_HEAD_DIM = 256
# On the CPU the fused op runs when the scores would have at least this many elements per batch
# entry (L * S). bench/bench_attention.py measured it as fast as the composition or faster from
# L = S = 16 up (2 threads; 0.4-1.0x forward, 0.4-1.05x forward + backward); smaller shapes,
# not measured, keep the composition.
CPU_MIN_SCORES = 16 * 16

_FLOATS = ("float32", "float64")
_LOW = ("float16", "bfloat16")  # computed by the float32 kernels through a cast
_NEG_INF = float("-inf")


def _resolve_scale(scale, e: int) -> float:
    return 1.0 / math.sqrt(e) if scale is None else float(scale)


def use_fused(query, key, value, attn_mask, dropout_p: float) -> bool:
    """Whether scaled_dot_product_attention (its inputs already validated) runs the fused op:
    no mask, no dropout, one float32/float64 dtype, equal leading dims, E and Ev within the
    kernels' limit, nothing empty; on the CPU only when the scores would be large."""
    if attn_mask is not None or dropout_p != 0.0:
        return False
    dt = query.dtype
    if dt.name not in _FLOATS + _LOW or key.dtype is not dt or value.dtype is not dt:
        return False
    lead = query.shape[:-2]
    if key.shape[:-2] != lead or value.shape[:-2] != lead:
        return False
    n, m, e, ev = query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]
    if not (0 < e <= MAX_HEAD_DIM and 0 < ev <= MAX_HEAD_DIM) or n == 0 or m == 0:
        return False
    return query._device.type != "cpu" or n * m >= CPU_MIN_SCORES


def _check(op: str, query, key, value, is_causal, scale) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.__class__ is not Tensor:
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    dt = query.dtype
    if dt.name not in _FLOATS + _LOW:
        raise TypeError(f"{op}: expected float16, bfloat16, float32 or float64 tensors, got "
                        f"{dt.name}")
    for name, t in (("key", key), ("value", value)):
        if t.dtype is not dt:
            raise TypeError(f"{op}: {name} has dtype {t.dtype.name} but query has {dt.name}")
    check_same_device(op, query, key, value)
    if query.ndim < 2 or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(f"{op}: query, key and value must have the same number of dimensions, "
                         f"at least 2 (..., seq, dim), got shapes {query.shape}, {key.shape} "
                         f"and {value.shape}")
    if key.shape[:-2] != query.shape[:-2] or value.shape[:-2] != query.shape[:-2]:
        raise ValueError(f"{op}: query, key and value must have the same leading dimensions "
                         f"(no broadcasting), got shapes {query.shape}, {key.shape} and "
                         f"{value.shape}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"{op}: query and key must have the same last dimension, got shapes "
                         f"{query.shape} and {key.shape}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{op}: key and value must have the same sequence length (dim -2), "
                         f"got shapes {key.shape} and {value.shape}")
    e, ev = query.shape[-1], value.shape[-1]
    if not (0 < e <= MAX_HEAD_DIM and 0 < ev <= MAX_HEAD_DIM):
        raise ValueError(f"{op}: the embedding sizes of query ({e}) and value ({ev}) must be "
                         f"between 1 and {MAX_HEAD_DIM}")
    if not isinstance(is_causal, bool):
        raise TypeError(f"{op}: is_causal must be a bool, got {type(is_causal).__name__}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{op}: scale must be a float or None, got {type(scale).__name__}")


def _dims(query, key, value) -> tuple:
    """(batch, L, S, E, Ev): the leading dims flattened into one batch."""
    batch = 1
    for s in query.shape[:-2]:
        batch *= s
    return batch, query.shape[-2], key.shape[-2], query.shape[-1], value.shape[-1]


def _empty(like: Tensor, shape: tuple) -> Tensor:
    return Tensor._empty(shape, like.dtype, like._device, like._be)


def _stats(like: Tensor, shape: tuple) -> Tensor:
    """The row statistics' buffer (lse, delta): float32 for the 16-bit kernels."""
    dt = _dt.float32 if like.dtype.name in _LOW else like.dtype
    return Tensor._empty(shape, dt, like._device, like._be)


def _native(t: Tensor) -> bool:
    """Whether t's backend runs the fused kernels in t's dtype (the 16-bit ones: the CPU's)."""
    return t._be.kernel(f"st_attention_{t.dtype.suffix}") is not None


@register
class ScaledDotProductAttentionFused(OpSpec):
    """softmax(q k^T * scale, keys j <= i when is_causal) v, from the fused kernels; the
    row log-sum-exps (kept for the backward) never leave the op."""

    name = "_scaled_dot_product_attention_fused"
    onnx = None

    @staticmethod
    def forward(ctx, query, key, value, is_causal=False, scale=1.0):
        batch, n, m, e, ev = _dims(query, key, value)
        q, k, v = contiguous(query), contiguous(key), contiguous(value)
        out = _empty(q, q.shape[:-1] + (ev,))
        lse = _stats(q, (batch, n))
        if batch and n:
            kernel(q, "attention")(ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), batch, n, m, e, ev,
                                   scale, int(is_causal))
        ctx.save_for_backward(query, key, value, out)
        ctx.lse, ctx.is_causal, ctx.scale = lse, is_causal, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        query, key, value, out = ctx.saved_tensors
        if _ag._mode.enabled:  # create_graph: the composition's gradient, differentiable again
            return _grad_composed(query, key, value, dout, ctx.is_causal, ctx.scale)
        batch, n, m, e, ev = _dims(query, key, value)
        q, k, v = contiguous(query), contiguous(key), contiguous(value)
        dq, dk, dv = _empty(q, q.shape), _empty(q, k.shape), _empty(q, v.shape)
        delta = _stats(q, (batch, n))
        kernel(q, "attention_backward")(
            ptr(q), ptr(k), ptr(v), ptr(contiguous(out)), ptr(contiguous(dout)), ptr(ctx.lse),
            ptr(delta), ptr(dq), ptr(dk), ptr(dv), batch, n, m, e, ev, ctx.scale,
            int(ctx.is_causal))
        return dq, dk, dv

    @staticmethod
    def reference(query, key, value, is_causal=False, scale=None):
        e = query.shape[-1]
        s = np.matmul(query, np.swapaxes(key, -1, -2)) * _resolve_scale(scale, e)
        if is_causal:
            s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return np.matmul(p / p.sum(axis=-1, keepdims=True), value)

    @staticmethod
    def samples():
        r = np.random.default_rng(43)
        n = r.standard_normal
        return [
            ((n((2, 3, 4)), n((2, 5, 4)), n((2, 5, 3))), {}),
            ((n((2, 2, 5, 4)), n((2, 2, 3, 4)), n((2, 2, 3, 6))), {"is_causal": True}),
            ((n((4, 3)), n((4, 3)), n((4, 2))), {"is_causal": True, "scale": 0.7}),
        ]


def _grad_composed(query, key, value, dout, is_causal: bool, scale: float) -> tuple:
    """(dq, dk, dv) of softmax(q k^T * scale) v written with Tensor ops: the probabilities are
    recomputed, so every result is a differentiable function of q, k, v and dout."""
    from .attention import _causal  # attention imports this module

    s = matmul(mul(query, scale), transpose(key, -2, -1))
    if is_causal:
        s = where(_causal(s.shape[-2], s.shape[-1], query), s, _NEG_INF)
    p = softmax(s, -1)
    dv = matmul(transpose(p, -2, -1), dout)
    dp = matmul(dout, transpose(value, -2, -1))
    ds = mul(p, sub(dp, _sum(mul(dp, p), -1, keepdim=True)))
    dq = mul(matmul(ds, key), scale)
    dk = mul(matmul(transpose(ds, -2, -1), query), scale)
    return dq, dk, dv


def scaled_dot_product_attention_fused(query: Tensor, key: Tensor, value: Tensor,
                                       is_causal: bool = False,
                                       scale: float | None = None) -> Tensor:
    """softmax(query @ key^T * scale) @ value from the fused kernels, never storing the
    (..., L, S) scores. query is (..., L, E), key (..., S, E), value (..., S, Ev) with the same
    leading dims, float32 or float64, E and Ev at most 256; is_causal lets query i attend to
    keys 0..i (PyTorch's convention); scale defaults to 1/sqrt(E). Public callers use
    F.scaled_dot_product_attention, which comes here when it can.

    float16 and bfloat16 inputs compute in float32 and round the output (and, backward, the
    gradients) once: the CPU kernels widen a group of batch entries at a time; a backend
    without 16-bit kernels runs the float32 ones through a cast.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.attention_fused import scaled_dot_product_attention_fused
        >>> q, k, v = st.ones(1, 2, 8), st.ones(1, 5, 8), st.randn(1, 5, 3)
        >>> scaled_dot_product_attention_fused(q, k, v).shape
        (1, 2, 3)
    """
    op = "scaled_dot_product_attention"
    _check(op, query, key, value, is_causal, scale)
    scale = _resolve_scale(scale, query.shape[-1])
    dt = query.dtype
    if dt.name in _LOW and not _native(query):
        q, k, v = (cast(t, _dt.float32) for t in (query, key, value))
        out = apply(ScaledDotProductAttentionFused, q, k, v, is_causal=is_causal, scale=scale)
        return cast(out, dt)
    return apply(ScaledDotProductAttentionFused, query, key, value, is_causal=is_causal,
                 scale=scale)


ScaledDotProductAttentionFused.fn = staticmethod(scaled_dot_product_attention_fused)
