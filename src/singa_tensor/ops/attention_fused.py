"""Fused scaled dot-product attention: softmax(q k^T * scale) v without the (L, S) scores.

The kernels (header: "Scaled dot-product attention, fused") take the keys a block at a time
with an online softmax, so memory grows with L * Ev, not L * S, and keep each row's
log-sum-exp for the backward, which recomputes the probabilities blockwise. Under create_graph
the backward is written with Tensor ops instead (the gradient of the composition), so the op
differentiates twice. `scaled_dot_product_attention` dispatches here when no mask and no
dropout are asked for (see `use_fused`).

`self_attention_packed` runs the same kernels on the in-projection's output of multi-head
self-attention as it lies, (N, L, 3E) or (L, N, 3E), through their strided variants: q, k and v
are read in place, the heads' outputs are written side by side, and the backward writes the
projection's gradient in one buffer. nn.MultiheadAttention takes it on the CPU when no mask,
weights or dropout are asked for (see `use_packed`).

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
from ._registry import int64s as _int64s
from .elementwise import mul, sub, where
from .layout import cast, permute, reshape, transpose
from .linalg import matmul
from .reduce import sum as _sum
from .reduce_ext import softmax
from .shape import stack, unbind

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


# ---- self-attention on one projected tensor ------------------------------------------------------


def _packed_geometry(qkv: Tensor, heads: int, batch_first: bool) -> tuple:
    """(N, L, E, D) of a projected (N, L, 3E) (batch_first) or (L, N, 3E) tensor."""
    a, b, e3 = qkv.shape
    n, l = (a, b) if batch_first else (b, a)
    e = e3 // 3
    return n, l, e, e // heads


def _packed_lay(n: int, l: int, heads: int, d: int, width: int, batch_first: bool) -> tuple:
    """The kernels' (heads, outer, head, row) strides of one part of a contiguous (N, L, width)
    or (L, N, width) tensor whose features hold heads of d side by side."""
    if batch_first:
        return (heads, l * width, d, width)
    return (heads, width, d, n * width)


def _packed_parts(qkv: Tensor, heads: int, batch_first: bool) -> tuple:
    """q, k, v of a projected tensor as (N, H, L, D) views, differentiable."""
    n, l, e, d = _packed_geometry(qkv, heads, batch_first)
    x = reshape(qkv, *qkv.shape[:2], 3, heads, d)
    return unbind(permute(x, (2, 0, 3, 1, 4) if batch_first else (2, 1, 3, 0, 4)), 0)


def _packed_merge(out: Tensor, batch_first: bool) -> Tensor:
    """(N, H, L, D) -> (N, L, H * D) or (L, N, H * D)."""
    n, h, l, d = out.shape
    if batch_first:
        return reshape(permute(out, (0, 2, 1, 3)), n, l, h * d)
    return reshape(permute(out, (2, 0, 1, 3)), l, n, h * d)


@register
class PackedSelfAttention(OpSpec):
    """Multi-head self-attention on the in-projection's output: qkv (N, L, 3E) (batch_first)
    or (L, N, 3E) holds q, k and v side by side, each E = heads * D split into heads; the
    result is (N, L, E) or (L, N, E), heads side by side, ready for the out-projection. The
    kernels read the heads where they lie and write the output and (backward) the gradient of
    qkv in place, so none of the split, transpose, merge and stack copies are made."""

    name = "_packed_self_attention"
    onnx = None

    @staticmethod
    def forward(ctx, qkv, heads, batch_first=True, is_causal=False, scale=1.0):
        n, l, e, d = _packed_geometry(qkv, heads, batch_first)
        x = contiguous(qkv)
        out = _empty(x, x.shape[:2] + (e,))
        lse = _stats(x, (n * heads, l))
        wide, narrow = (_packed_lay(n, l, heads, d, w, batch_first) for w in (3 * e, e))
        if n and l:
            base = ptr(x)
            kernel(x, "attention_strided")(
                base, base + e, base + 2 * e, ptr(out), ptr(lse),
                _int64s(x, wide * 3 + narrow), n * heads, l, l, d, d, scale, int(is_causal))
        ctx.save_for_backward(qkv, out)
        ctx.lse, ctx.lays = lse, (wide, narrow)
        ctx.heads, ctx.batch_first, ctx.is_causal, ctx.scale = heads, batch_first, is_causal, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        qkv, out = ctx.saved_tensors
        heads, batch_first = ctx.heads, ctx.batch_first
        if _ag._mode.enabled:  # create_graph: the composition's gradient, differentiable again
            q, k, v = _packed_parts(qkv, heads, batch_first)
            g = _packed_parts_out(dout, heads, batch_first)
            grads = _grad_composed(q, k, v, g, ctx.is_causal, ctx.scale)
            x = stack(grads, 0)  # (3, N, H, L, D)
            x = permute(x, (1, 3, 0, 2, 4) if batch_first else (3, 1, 0, 2, 4))
            return reshape(x, *qkv.shape), None, None, None, None
        n, l, e, d = _packed_geometry(qkv, heads, batch_first)
        x, g = contiguous(qkv), contiguous(dout)
        dqkv = _empty(x, x.shape)
        delta = _stats(x, (n * heads, l))
        wide, narrow = ctx.lays
        if n and l:
            base, dbase = ptr(x), ptr(dqkv)
            kernel(x, "attention_backward_strided")(
                base, base + e, base + 2 * e, ptr(contiguous(out)), ptr(g), ptr(ctx.lse),
                ptr(delta), dbase, dbase + e, dbase + 2 * e,
                _int64s(x, wide * 3 + narrow * 2 + wide * 3), n * heads, l, l, d, d, ctx.scale,
                int(ctx.is_causal))
        return dqkv, None, None, None, None

    @staticmethod
    def reference(qkv, heads, batch_first=True, is_causal=False, scale=None):
        x = qkv if batch_first else np.swapaxes(qkv, 0, 1)
        n, l, e3 = x.shape
        e = e3 // 3
        d = e // heads
        parts = np.moveaxis(x.reshape(n, l, 3, heads, d), (2, 3), (0, 1))  # (3, H, N, L, D)
        q, k, v = (np.swapaxes(p, 0, 1) for p in parts)  # (N, H, L, D)
        out = ScaledDotProductAttentionFused.reference(q, k, v, is_causal, scale)
        out = np.swapaxes(out, 1, 2).reshape(n, l, e)
        return out if batch_first else np.swapaxes(out, 0, 1)

    @staticmethod
    def samples():
        r = np.random.default_rng(47)
        n = r.standard_normal
        return [
            ((n((2, 5, 12)), 2), {}),
            ((n((5, 2, 24)), 4), {"batch_first": False, "is_causal": True, "scale": 0.3}),
            ((n((1, 70, 6)), 1), {"is_causal": True, "scale": 0.8}),
        ]


def _packed_parts_out(out: Tensor, heads: int, batch_first: bool) -> Tensor:
    """(N, L, E) or (L, N, E) -> (N, H, L, D)."""
    a, b, e = out.shape
    x = reshape(out, a, b, heads, e // heads)
    return permute(x, (0, 2, 1, 3) if batch_first else (1, 2, 0, 3))


def use_packed(qkv: Tensor, heads: int, batch_first: bool) -> bool:
    """Whether multi-head self-attention on this projection runs self_attention_packed's
    strided kernels: a backend that has them (the CPU's), float32 or float64, heads within the
    kernels' size limit and scores as large as use_fused asks of the CPU."""
    if qkv.ndim != 3 or qkv.shape[-1] % (3 * heads):
        return False
    seq = qkv.shape[1] if batch_first else qkv.shape[0]
    return seq * seq >= CPU_MIN_SCORES and _strided_kernels(qkv, qkv.shape[-1] // (3 * heads))


def _strided_kernels(qkv: Tensor, d: int) -> bool:
    """Whether qkv's backend has strided kernels for its dtype and heads of d."""
    return (qkv.dtype.name in _FLOATS and 0 < d <= MAX_HEAD_DIM and
            qkv._be.kernel(f"st_attention_strided_{qkv.dtype.suffix}") is not None)


def self_attention_packed(qkv: Tensor, heads: int, batch_first: bool = True,
                          is_causal: bool = False, scale: float | None = None) -> Tensor:
    """softmax(q k^T * scale) v per head, for q, k and v side by side in one projected tensor
    qkv of shape (N, L, 3E) (batch_first) or (L, N, 3E); returns (N, L, E) or (L, N, E) with
    the heads side by side, as nn.MultiheadAttention's out-projection takes it. scale defaults
    to 1/sqrt(E / heads). Backends without the strided kernels, and other dtypes, run the
    split heads through scaled_dot_product_attention_fused instead, with the same result.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.attention_fused import self_attention_packed
        >>> qkv = st.randn(2, 5, 3 * 8)                      # (N, L, 3E), 2 heads of 4
        >>> self_attention_packed(qkv, 2, is_causal=True).shape
        (2, 5, 8)
    """
    op = "self_attention_packed"
    if qkv.__class__ is not Tensor:
        raise TypeError(f"{op}: qkv must be a Tensor, got {type(qkv).__name__}")
    if isinstance(heads, bool) or not isinstance(heads, int) or heads <= 0:
        raise ValueError(f"{op}: heads must be a positive int, got {heads!r}")
    if qkv.ndim != 3 or qkv.shape[-1] % (3 * heads):
        raise ValueError(f"{op}: qkv must be 3-D with a last dimension of 3 * heads * head_dim "
                         f"(heads={heads}), got shape {qkv.shape}")
    if not qkv.dtype.is_floating_point:
        raise TypeError(f"{op}: qkv must be a floating point tensor, got {qkv.dtype.name}")
    if not isinstance(is_causal, bool):
        raise TypeError(f"{op}: is_causal must be a bool, got {type(is_causal).__name__}")
    d = qkv.shape[-1] // (3 * heads)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{op}: scale must be a float or None, got {type(scale).__name__}")
    if _strided_kernels(qkv, d):
        return apply(PackedSelfAttention, qkv, heads, batch_first=bool(batch_first),
                     is_causal=is_causal, scale=_resolve_scale(scale, d))
    q, k, v = _packed_parts(qkv, heads, bool(batch_first))
    out = scaled_dot_product_attention_fused(q, k, v, is_causal, scale)
    return _packed_merge(out, bool(batch_first))


PackedSelfAttention.fn = staticmethod(self_attention_packed)
