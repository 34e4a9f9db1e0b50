"""Scaled dot-product attention and the functional multi-head attention built on it.

Both are compositions of matmul, softmax and where, so they run on every backend and are
differentiable to any order; scaled_dot_product_attention without a mask or dropout runs the
fused kernels of attention_fused.py instead (on the CPU once the scores would be large), which
never store the (L, S) scores. The per-element work is kept to what the result needs: the scale
is folded into the query (L x E elements, not the L x S scores), masks stay at their own
(broadcast) shape until the one `where` or `add` that applies them, and heads are views of the
projected tensor, never a Python loop.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _execution, creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import OpSpec, broadcast_shapes, check_same_device, register, traced
from .attention_fused import (
    scaled_dot_product_attention_fused,
    self_attention_packed,
    use_fused,
    use_packed,
)
from .dense import _fusable, _linear_fused, linear
from .elementwise import add, mul, where
from .layout import cast, make_contiguous, permute, reshape, transpose
from .linalg import matmul
from .reduce import any as _any
from .reduce import mean as _mean
from .reduce_ext import softmax
from .shape import unbind

_NEG_INF = float("-inf")


# ---- checks ------------------------------------------------------------------------------------


def _float_tensor(op: str, x, name: str) -> Tensor:
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a floating point tensor, got {x.dtype.name}")
    return x


def _check_p(op: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p!r}")
    return float(p)


def _check_mask(op: str, mask, name: str, target: tuple, query: Tensor) -> Tensor:
    """mask must be bool or float and broadcast to target without growing it; a float mask
    comes back in query's dtype (a float64 mask must not turn float32 scores into float64)."""
    if mask.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor or None, got {type(mask).__name__}")
    check_same_device(op, query, mask)
    if mask.dtype is not _dt.bool_ and not mask.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a bool or floating point tensor, got "
                        f"{mask.dtype.name}")
    try:
        ok = broadcast_shapes(mask.shape, target) == target
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: {name} of shape {tuple(mask.shape)} cannot be broadcast to the "
                         f"attention scores' shape {target}")
    if mask.dtype is not _dt.bool_ and mask.dtype is not query.dtype:
        mask = cast(mask, query.dtype)
    return mask


def _check_qkv(op: str, query, key, value) -> tuple:
    """Validated (batch shape, L, S) of the scores q @ k^T."""
    q = _float_tensor(op, query, "query")
    k = _float_tensor(op, key, "key")
    v = _float_tensor(op, value, "value")
    check_same_device(op, q, k, v)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{op}: query, key and value must be at least 2-D (..., seq, dim), got "
                         f"shapes {q.shape}, {k.shape} and {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{op}: query and key must have the same last dimension (embedding "
                         f"size), got shapes {q.shape} and {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{op}: key and value must have the same sequence length (dim -2), "
                         f"got shapes {k.shape} and {v.shape}")
    try:
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the batch dimensions of query {q.shape}, key {k.shape} and "
                         f"value {v.shape} cannot be broadcast together") from None
    return batch, q.shape[-2], k.shape[-2]


# ---- masks -------------------------------------------------------------------------------------


def _causal(n: int, m: int, like: Tensor) -> Tensor:
    """(n, m) bool: True where column <= row (the top-left aligned lower triangle)."""
    rows = reshape(creation.arange(n, device=like.device), n, 1)
    return creation.arange(m, device=like.device) <= rows


def _dropout(x: Tensor, p: float) -> Tensor:
    if p == 0.0:
        return x
    if p == 1.0:
        return mul(x, 0.0)
    draw = creation.rand(*x.shape, dtype=x.dtype, device=x.device)
    return mul(x, mul((draw >= p).to(x.dtype), 1.0 / (1.0 - p)))


def _scores(query, key, scale, e):
    s = 1.0 / math.sqrt(e) if scale is None else float(scale)
    q = query if s == 1.0 else mul(query, s)
    return matmul(q, transpose(key, -2, -1))


# ---- scaled dot-product attention --------------------------------------------------------------


@traced("scaled_dot_product_attention")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value over the last two dimensions.

    query is (..., L, E), key (..., S, E), value (..., S, Ev); the leading dimensions
    broadcast. attn_mask broadcasts to (..., L, S): a bool mask says which keys take part
    (True = attend), a float mask is added to the scores. is_causal lets position i attend to
    keys 0..i only (combined with attn_mask when both are given). scale defaults to
    1/sqrt(E). dropout_p drops attention weights (pass 0.0 outside training). As in PyTorch,
    a query row that may attend to no key gives zeros, not NaN.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> q = k = v = st.ones(2, 4, 3, 8)           # (batch, heads, seq, dim)
        >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
        (2, 4, 3, 8)
    """
    op = "scaled_dot_product_attention"
    batch, n, m = _check_qkv(op, query, key, value)
    dropout_p = _check_p(op, dropout_p)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{op}: scale must be a float or None, got {type(scale).__name__}")
    if use_fused(query, key, value, attn_mask, dropout_p):
        return scaled_dot_product_attention_fused(query, key, value, bool(is_causal), scale)
    allowed = _causal(n, m, query) if is_causal else None
    bias = None
    row_ok = None
    if attn_mask is not None:
        attn_mask = _check_mask(op, attn_mask, "attn_mask", batch + (n, m), query)
        if attn_mask.dtype is _dt.bool_:
            allowed = attn_mask if allowed is None else allowed & attn_mask
            live = allowed
        else:
            bias = attn_mask
            live = attn_mask != _NEG_INF
            if allowed is not None:
                live = live & allowed
        # a row with no live key would be softmax(all -inf) = NaN, and its NaN gradient would
        # reach every input through the matmuls; such rows are opened up here (on the mask's
        # own, small shape) and zeroed in the output
        row_ok = _any(live, -1, keepdim=True)
        if allowed is not None:
            allowed = allowed | ~row_ok
        if bias is not None:
            bias = where(row_ok, bias, 0.0)
    out = _attend(query, key, value, allowed, bias, dropout_p, scale)
    out = out if row_ok is None else where(row_ok, out, 0.0)
    if query.dtype in (_dt.float16, _dt.bfloat16) and out.dtype is not query.dtype:
        out = cast(out, query.dtype)  # a 16-bit query's attention comes back in its dtype
    return out


def _attend(query, key, value, allowed, bias, dropout_p, scale, weights_out=None):
    """softmax(q k^T * scale + bias, restricted to allowed) @ v; with weights_out (a list), the
    attention weights (after dropout, as PyTorch returns them) are appended to it."""
    s = _scores(query, key, scale, query.shape[-1])
    if bias is not None:
        s = add(s, bias)
    if allowed is not None:
        s = where(allowed, s, _NEG_INF)
    w = _dropout(softmax(s, -1), dropout_p)
    if weights_out is not None:
        weights_out.append(w)
    return matmul(w, value)


def _sdpa_reference(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                    scale=None):
    if dropout_p:
        raise ValueError("scaled_dot_product_attention reference: dropout_p must be 0")
    n, m, e = query.shape[-2], key.shape[-2], query.shape[-1]
    s = np.matmul(query, np.swapaxes(key, -1, -2)) * (1 / np.sqrt(e) if scale is None else scale)
    allowed = np.ones((n, m), dtype=bool)
    if is_causal:
        allowed = np.tril(allowed)
    if attn_mask is not None and attn_mask.dtype == np.bool_:
        allowed = allowed & attn_mask
    elif attn_mask is not None:
        s = s + attn_mask
    s = np.where(allowed, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    ok = np.isfinite(mx)
    p = np.exp(s - np.where(ok, mx, 0))
    p = np.where(ok, p / np.where(ok, p.sum(axis=-1, keepdims=True), 1), 0.0)
    return np.matmul(p, value)


def _sdpa_samples():
    r = np.random.default_rng(41)
    n = r.standard_normal
    q, k, v = n((2, 2, 3, 4)), n((2, 2, 5, 4)), n((2, 2, 5, 3))
    bool_mask = r.uniform(size=(3, 5)) > 0.3
    bool_mask[1] = False  # a row that attends to nothing: zeros, as in PyTorch
    pad = np.array([[True] * 5, [True, True, False, True, False]]).reshape(2, 1, 1, 5)
    return [
        ((q, k, v), {}),
        ((q, k, v), {"is_causal": True, "scale": 0.7}),
        ((q, k, v, bool_mask), {}),
        ((q, k, v, pad), {"is_causal": True}),
        ((q, k, v, n((2, 1, 3, 5))), {}),
        ((n((3, 4)), n((5, 4)), n((5, 2))), {"is_causal": True}),
        ((n((2, 3, 4)), n((5, 4)), n((5, 2))), {}),
    ]


@register
class ScaledDotProductAttention(OpSpec):
    name = "scaled_dot_product_attention"
    onnx = "Attention"
    composite = True
    fn = staticmethod(scaled_dot_product_attention)
    reference = staticmethod(_sdpa_reference)
    samples = staticmethod(_sdpa_samples)


def _sdpa_onnx(cls, b, args, attrs, outs):
    """The Attention node is opset 23, past what we write: MatMul, Mul by the scale, the mask
    as Add / Where, Softmax, MatMul. A row that may attend to no key gives zeros, as ours."""
    q, k, v, mask = args["query"], args["key"], args["value"], args["attn_mask"]
    if args["dropout_p"]:
        raise RuntimeError("onnx export: scaled_dot_product_attention with dropout_p > 0 "
                           "cannot be exported (pass dropout_p=0.0 outside training)")
    scale = args["scale"]
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    qn = b.value(q)
    if s != 1.0:
        (qn,) = b.node("Mul", [qn, b.scalar(s, q)])
    perm = list(range(k.ndim - 2)) + [k.ndim - 1, k.ndim - 2]
    (kt,) = b.node("Transpose", [b.value(k)], perm=perm)
    (scores,) = b.node("MatMul", [qn, kt])
    allowed = None
    if args["is_causal"]:
        allowed = _onnx_causal(b, scores, q.shape[-2], k.shape[-2])
    if mask is not None:
        mn = b.value(mask)
        if mask.dtype is _dt.bool_:
            allowed = mn if allowed is None else b.node("And", [allowed, mn])[0]
        else:
            if mask.dtype is not q.dtype:
                from ..onnx._export import onnx_type

                (mn,) = b.node("Cast", [mn], to=onnx_type(q.dtype))
            (scores,) = b.node("Add", [scores, mn])
    if allowed is not None:
        (scores,) = b.node("Where", [allowed, scores, b.scalar(_NEG_INF, q)])
    row_ok = None
    if mask is not None:
        # -inf everywhere in a row (no live key) would make Softmax NaN: such rows are zeroed
        top = _onnx_reduce_max_last(b, scores)
        (dead,) = b.node("Equal", [top, b.scalar(_NEG_INF, q)])
        (row_ok,) = b.node("Not", [dead])
        (scores,) = b.node("Where", [row_ok, scores, b.scalar(0.0, q)])
    (w,) = b.node("Softmax", [scores], axis=-1)
    if row_ok is None:
        b.node("MatMul", [w, b.value(v)], outputs=outs)
        return
    (out,) = b.node("MatMul", [w, b.value(v)])
    b.node("Where", [row_ok, out, b.scalar(0.0, q)], outputs=outs)


def _onnx_causal(b, scores: str, n: int, m: int) -> str:
    """The bool lower triangle over the scores' last two dims. From opset 14 it is computed
    from the scores' shape (Trilu), so the sequence lengths stay dynamic; below, a constant."""
    if b.opset < 14:
        return b.const(np.tril(np.ones((n, m), dtype=np.bool_)))
    from onnx import TensorProto, helper

    (shape,) = b.node("Shape", [scores])
    (nm,) = b.node("Slice", [shape, b.ints([-2]), b.ints([np.iinfo(np.int64).max])])
    one = helper.make_tensor("value", TensorProto.FLOAT, [1], [1.0])
    (ones,) = b.node("ConstantOfShape", [nm], value=one)
    (low,) = b.node("Trilu", [ones], upper=0)
    return b.node("Cast", [low], to=TensorProto.BOOL)[0]


def _onnx_reduce_max_last(b, name: str) -> str:
    if b.opset >= 18:
        return b.node("ReduceMax", [name, b.ints([-1])], keepdims=1)[0]
    return b.node("ReduceMax", [name], axes=[-1], keepdims=1)[0]


ScaledDotProductAttention.onnx_export = classmethod(_sdpa_onnx)


# ---- multi-head attention ----------------------------------------------------------------------


def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    if _execution.autocast_count:  # the listed linear casts x, w and b together (amp/)
        return linear(x, w, b)
    if _fusable(x, w, b):  # one op: the product reads w transposed, the bias starts each row
        return _linear_fused(x, w, b)
    y = matmul(x, transpose(w, 0, 1))
    return y if b is None else add(y, b)


def _split_heads(x: Tensor, lead: tuple, parts: int, heads: int, batch_first: bool) -> tuple:
    """x (*lead, parts * E) -> parts views of shape (N, heads, seq, E / heads)."""
    d = x.shape[-1] // (parts * heads)
    x = reshape(x, *lead, parts, heads, d)
    # lead is (N, seq) or (seq, N): bring parts first, then N, heads, seq
    x = permute(x, (2, 0, 3, 1, 4) if batch_first else (2, 1, 3, 0, 4))
    # one copy makes every part contiguous, as the attention kernels read them, and one node
    # splits them (its backward stacks the parts' gradients)
    return unbind(make_contiguous(x), 0)


def _check_weight(op: str, w, name: str, shape: tuple) -> Tensor:
    if w is None:
        raise ValueError(f"{op}: {name} is required")
    _float_tensor(op, w, name)
    if tuple(w.shape) != shape:
        raise ValueError(f"{op}: {name} must have shape {shape}, got {tuple(w.shape)}")
    return w


def _mha_mask(op: str, query: Tensor, mask, name: str, shapes: tuple, what: str):
    """A checked MHA mask (or None); float masks come back in query's dtype."""
    if mask is None:
        return None
    if mask.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor or None, got {type(mask).__name__}")
    if mask.dtype is not _dt.bool_ and not mask.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a bool or floating point tensor, got "
                        f"{mask.dtype.name}")
    if tuple(mask.shape) not in shapes:
        raise ValueError(f"{op}: {name} must have shape {' or '.join(map(str, shapes))} "
                         f"({what}), got {tuple(mask.shape)}")
    check_same_device(op, query, mask)
    if mask.dtype is not _dt.bool_ and mask.dtype is not query.dtype:
        mask = cast(mask, query.dtype)
    return mask


def _mha_masks(op: str, query: Tensor, key_padding_mask, attn_mask, n: int, heads: int,
               tl: int, sl: int, unbatched: bool) -> tuple:
    """PyTorch's MHA masks (True / -inf = blocked) as (allowed bool, additive float), each
    None or broadcastable to (N, heads, L, S)."""
    three = (heads, tl, sl) if unbatched else (n * heads, tl, sl)
    am = _mha_mask(op, query, attn_mask, "attn_mask", ((tl, sl), three),
                   "(L, S) or (batch * num_heads, L, S)")
    kpm = _mha_mask(op, query, key_padding_mask, "key_padding_mask",
                    ((sl,),) if unbatched else ((n, sl),), "(batch, S)")
    blocked = bias = None
    for m in (am, kpm):
        if m is None:
            continue
        if m is kpm:
            m = reshape(m, n, 1, 1, sl)
        elif m.ndim == 3:
            m = reshape(m, n, heads, tl, sl)
        if m.dtype is _dt.bool_:
            blocked = m if blocked is None else blocked | m
        else:
            bias = m if bias is None else add(bias, m)
    return (None if blocked is None else ~blocked), bias


def _onnx_tracing() -> bool:
    """Whether an ONNX export traces this call (the packed op has no ONNX form; the split
    heads export through scaled_dot_product_attention's)."""
    ex = _execution.current() if _execution.running_count else None
    return ex is not None and ex.tracing


def _multi_head_attention(op: str, query, key, value, num_heads: int, in_proj_weight,
                          in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight,
                          out_proj_weight, out_proj_bias, dropout_p: float, key_padding_mask,
                          need_weights: bool, attn_mask, average_attn_weights: bool,
                          is_causal: bool, batch_first: bool) -> tuple:
    """The one implementation behind nn.MultiheadAttention and multi_head_attention_forward;
    inputs are (N, L, E) when batch_first, else (L, N, E), or unbatched (L, E)."""
    for x, name in ((query, "query"), (key, "key"), (value, "value")):
        _float_tensor(op, x, name)
    unbatched = query.ndim == 2
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(f"{op}: query, key and value must all be 3-D (batched) or all 2-D "
                         f"(unbatched), got shapes {query.shape}, {key.shape} and {value.shape}")
    check_same_device(op, query, key, value)
    if unbatched:
        bdim = 0 if batch_first else 1
        query, key, value = (x.unsqueeze(bdim) for x in (query, key, value))
    seq_dim = 1 if batch_first else 0
    n, tl, e = query.shape[1 - seq_dim], query.shape[seq_dim], query.shape[2]
    sl = key.shape[seq_dim]
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(f"{op}: key and value must have the same batch and sequence sizes, "
                         f"got shapes {key.shape} and {value.shape}")
    if key.shape[1 - seq_dim] != n:
        raise ValueError(f"{op}: query and key must have the same batch size, got shapes "
                         f"{query.shape} and {key.shape}")
    if num_heads <= 0 or e % num_heads:
        raise ValueError(f"{op}: embed_dim {e} must be divisible by num_heads {num_heads}")
    kd, vd = key.shape[2], value.shape[2]
    lead_q, lead_k = query.shape[:2], key.shape[:2]

    if in_proj_weight is not None:
        _check_weight(op, in_proj_weight, "in_proj_weight", (3 * e, e))
        if kd != e or vd != e:
            raise ValueError(f"{op}: key and value must have embed_dim {e} features when "
                             f"in_proj_weight is used, got shapes {key.shape} and {value.shape}")
    else:
        _check_weight(op, q_proj_weight, "q_proj_weight", (e, e))
        _check_weight(op, k_proj_weight, "k_proj_weight", (e, kd))
        _check_weight(op, v_proj_weight, "v_proj_weight", (e, vd))
    if in_proj_bias is not None:
        _check_weight(op, in_proj_bias, "in_proj_bias", (3 * e,))
    _check_weight(op, out_proj_weight, "out_proj_weight", (e, e))
    if out_proj_bias is not None:
        _check_weight(op, out_proj_bias, "out_proj_bias", (e,))

    def bias_part(i: int, j: int):
        return None if in_proj_bias is None else in_proj_bias[i * e:j * e]

    if in_proj_weight is not None and query is key and key is value:
        # self-attention: one product for q, k and v
        qkv = _linear(query, in_proj_weight, in_proj_bias)
        if attn_mask is None and key_padding_mask is None and not need_weights and \
                dropout_p == 0.0 and use_packed(qkv, num_heads, batch_first) and \
                not _onnx_tracing():
            # the heads read and written where the projections lie: no split or merge copies
            out = self_attention_packed(qkv, num_heads, batch_first, bool(is_causal))
            out = _linear(out, out_proj_weight, out_proj_bias)
            if unbatched:
                out = out[0] if batch_first else out[:, 0]
            return out, None
        q, k, v = _split_heads(qkv, lead_q, 3, num_heads, batch_first)
    elif in_proj_weight is not None and key is value:
        (q,) = _split_heads(_linear(query, in_proj_weight[:e], bias_part(0, 1)), lead_q, 1,
                            num_heads, batch_first)
        k, v = _split_heads(_linear(key, in_proj_weight[e:], bias_part(1, 3)), lead_k, 2,
                            num_heads, batch_first)
    else:
        ws = ((in_proj_weight[:e], in_proj_weight[e:2 * e], in_proj_weight[2 * e:])
              if in_proj_weight is not None else (q_proj_weight, k_proj_weight, v_proj_weight))
        (q,) = _split_heads(_linear(query, ws[0], bias_part(0, 1)), lead_q, 1, num_heads,
                            batch_first)
        (k,) = _split_heads(_linear(key, ws[1], bias_part(1, 2)), lead_k, 1, num_heads,
                            batch_first)
        (v,) = _split_heads(_linear(value, ws[2], bias_part(2, 3)), lead_k, 1, num_heads,
                            batch_first)

    allowed, bias = _mha_masks(op, q, key_padding_mask, attn_mask, n, num_heads, tl, sl,
                               unbatched)
    # a causal mask alone stays a flag, so that the fused kernels can take the call
    causal_flag = is_causal and attn_mask is None and allowed is None and bias is None and \
        not need_weights
    if is_causal and attn_mask is None and not causal_flag:
        causal = _causal(tl, sl, query)
        allowed = causal if allowed is None else allowed & causal
    weights = None
    if need_weights:
        # PyTorch's explicit softmax here: a row with every key masked is NaN
        kept = []
        out = _attend(q, k, v, allowed, bias, dropout_p, None, kept)
        weights = _mean(kept[0], 1) if average_attn_weights else kept[0]
        if unbatched:
            weights = weights[0]
    else:
        mask = allowed
        if bias is not None:
            mask = bias if allowed is None else where(allowed, bias, _NEG_INF)
        out = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal=causal_flag)
    # (N, H, L, D) -> the input's layout, heads side by side
    out = permute(out, (0, 2, 1, 3) if batch_first else (2, 0, 1, 3))
    out = reshape(make_contiguous(out), *lead_q, e)
    out = _linear(out, out_proj_weight, out_proj_bias)
    if unbatched:
        out = out[0] if batch_first else out[:, 0]
    return out, weights


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple:
    """Multi-head attention with PyTorch's functional signature: inputs are (L, N, E) (or
    unbatched (L, E)); returns (output (L, N, E), attention weights or None).

    Masks follow nn.MultiheadAttention: in key_padding_mask (N, S) and attn_mask (L, S) or
    (N * num_heads, L, S), True (bool) marks a blocked position and a float mask is added to
    the scores. bias_k, bias_v, add_zero_attn, static_k and static_v are not supported.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.randn(5, 2, 8)                     # (L, N, E)
        >>> w, b = st.randn(24, 8), st.zeros(24)
        >>> out, attn = F.multi_head_attention_forward(x, x, x, 8, 2, w, b, None, None, False,
        ...                                            0.0, st.randn(8, 8), st.zeros(8))
        >>> out.shape, attn.shape
        ((5, 2, 8), (2, 5, 5))
    """
    op = "multi_head_attention_forward"
    if bias_k is not None or bias_v is not None or add_zero_attn:
        raise NotImplementedError(f"{op}: bias_k, bias_v and add_zero_attn are not supported")
    if static_k is not None or static_v is not None:
        raise NotImplementedError(f"{op}: static_k and static_v are not supported")
    if query.__class__ is Tensor and query.ndim >= 1 and query.shape[-1] != embed_dim_to_check:
        raise ValueError(f"{op}: query has embed_dim {query.shape[-1]}, expected "
                         f"embed_dim_to_check={embed_dim_to_check}")
    dropout_p = _check_p(op, dropout_p)
    if use_separate_proj_weight:
        in_proj_weight = None
    elif in_proj_weight is None:
        raise ValueError(f"{op}: in_proj_weight is required unless use_separate_proj_weight")
    return _multi_head_attention(op, query, key, value, num_heads, in_proj_weight, in_proj_bias,
                                 q_proj_weight, k_proj_weight, v_proj_weight, out_proj_weight,
                                 out_proj_bias, dropout_p if training else 0.0,
                                 key_padding_mask, need_weights, attn_mask,
                                 average_attn_weights, is_causal, batch_first=False)


__all__ = ["multi_head_attention_forward", "scaled_dot_product_attention"]
