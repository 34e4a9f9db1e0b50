"""Functions of nn.functional that are compositions of existing ops: the distances and
normalisations normalize, cosine_similarity, pairwise_distance, rms_norm and instance_norm,
and the parameter ops embedding_bag and bilinear.

Each is declared as a registry composite with a numpy reference, so the registry-driven tests
check its values, gradients and second derivatives; nn.functional exports them under their
PyTorch names. Norms are taken through `_safe_root`, whose gradient stays finite (zero) where
the norm is zero, which a plain sqrt of a zero sum would make NaN.
"""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..creation import tensor as _tensor_of
from ..creation import zeros as _zeros
from ..tensor import Tensor
from ._registry import REGISTRY, composite, expect_tensor
from .dense import padding_index
from .elementwise import where
from .index import index_select
from .linalg import matmul
from .shape import cat


def _number(op: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    return float(v)


def _float_tensor(op: str, x, name: str = "input") -> Tensor:
    expect_tensor(op, x, name)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a floating point tensor, got {x.dtype.name}")
    return x


def _dim(op: str, dim, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} out of range for a tensor of {ndim} dims")
    return dim % n


def _safe_root(s: Tensor, p: float) -> Tensor:
    """s ** (1 / p) for s >= 0, with a zero gradient at s == 0."""
    pos = s > 0
    safe = where(pos, s, 1.0)
    root = safe.sqrt() if p == 2.0 else safe ** (1.0 / p)
    return where(pos, root, 0.0)


def _p_norm(x: Tensor, p: float, dim, keepdim: bool) -> Tensor:
    if p == 2.0:
        return _safe_root((x * x).sum(dim=dim, keepdim=keepdim), 2.0)
    if p == 1.0:
        return x.abs().sum(dim=dim, keepdim=keepdim)
    if p == float("inf"):
        return x.abs().amax(dim=dim, keepdim=keepdim)
    if p == 0.0:
        return (x != 0).to(x.dtype).sum(dim=dim, keepdim=keepdim)
    return _safe_root((x.abs() ** p).sum(dim=dim, keepdim=keepdim), p)


def _np_norm(x, p, axis, keepdims=False):
    if p == float("inf"):
        return np.abs(x).max(axis=axis, keepdims=keepdims)
    if p == 0:
        return (x != 0).sum(axis=axis, keepdims=keepdims).astype(x.dtype)
    return (np.abs(x) ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


# ---- normalize ---------------------------------------------------------------------------------


def _normalize_np(x, p=2.0, dim=1, eps=1e-12):
    return x / np.maximum(_np_norm(x, p, dim, True), eps)


_rng = np.random.default_rng(41)


@composite("normalize", _normalize_np, samples=lambda: [
    ((_rng.standard_normal((3, 4)),), {}),
    ((_rng.standard_normal((2, 3, 2)),), {"p": 1.0, "dim": -1}),
    ((_rng.standard_normal((4,)),), {"p": 3.0, "dim": 0}),
])
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """input / max(||input||_p, eps), the p-norm taken along dim.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> [round(v, 4) for v in F.normalize(st.tensor([[3.0, 4.0]]))[0].tolist()]
        [0.6, 0.8]
    """
    op = "normalize"
    _float_tensor(op, input)
    p, eps = _number(op, "p", p), _number(op, "eps", eps)
    if out is not None:
        raise TypeError(f"{op}: out= is not supported")
    d = _dim(op, dim, input.ndim)
    if input.ndim == 0:
        input = input.reshape(1)
        return (input / _p_norm(input, p, d, True).clamp(min=eps)).reshape(())
    return input / _p_norm(input, p, d, True).clamp(min=eps)


# ---- cosine similarity and pairwise distance ---------------------------------------------------


def _pair(op: str, x1, x2) -> tuple:
    _float_tensor(op, x1, "x1")
    _float_tensor(op, x2, "x2")
    try:
        np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise ValueError(f"{op}: x1 of shape {tuple(x1.shape)} and x2 of shape "
                         f"{tuple(x2.shape)} do not broadcast") from None
    if x1.dtype is not x2.dtype:
        raise TypeError(f"{op}: x1 and x2 must have the same dtype, got {x1.dtype.name} and "
                        f"{x2.dtype.name}")
    return x1, x2


def _cosine_similarity_np(x1, x2, dim=1, eps=1e-8):
    n1 = np.maximum(np.sqrt((x1 * x1).sum(axis=dim)), eps)
    n2 = np.maximum(np.sqrt((x2 * x2).sum(axis=dim)), eps)
    return (x1 * x2).sum(axis=dim) / (n1 * n2)


@composite("cosine_similarity", _cosine_similarity_np, samples=lambda: [
    ((_rng.standard_normal((3, 4)), _rng.standard_normal((3, 4))), {}),
    ((_rng.standard_normal((2, 3)), _rng.standard_normal((3,))), {"dim": -1}),
])
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """x1 . x2 / (max(||x1||, eps) * max(||x2||, eps)) along dim (x1 and x2 broadcast).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.cosine_similarity(st.tensor([[1.0, 0.0]]), st.tensor([[1.0, 1.0]])).tolist()
        [0.7071067690849304]
    """
    op = "cosine_similarity"
    x1, x2 = _pair(op, x1, x2)
    eps = _number(op, "eps", eps)
    ndim = max(x1.ndim, x2.ndim)
    d = _dim(op, dim, ndim) - ndim  # negative: counts from the end of both operands
    n1 = _p_norm(x1, 2.0, d, False).clamp(min=eps)
    n2 = _p_norm(x2, 2.0, d, False).clamp(min=eps)
    return (x1 * x2).sum(dim=d) / (n1 * n2)


def _pairwise_distance_np(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return _np_norm(x1 - x2 + eps, p, -1, keepdim)


@composite("pairwise_distance", _pairwise_distance_np, samples=lambda: [
    ((_rng.standard_normal((3, 4)), _rng.standard_normal((3, 4))), {}),
    ((_rng.standard_normal((3, 4)), _rng.standard_normal((4,))), {"p": 1.0, "keepdim": True}),
    ((_rng.standard_normal((2, 5)), _rng.standard_normal((2, 5))), {"p": 3.0}),
])
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim (x1 and x2 broadcast).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.pairwise_distance(st.tensor([[0.0, 0.0]]), st.tensor([[3.0, 4.0]]), eps=0.0).tolist()
        [5.0]
    """
    op = "pairwise_distance"
    x1, x2 = _pair(op, x1, x2)
    p, eps = _number(op, "p", p), _number(op, "eps", eps)
    if p < 0:
        raise ValueError(f"{op}: p must be non-negative, got {p}")
    diff = x1 - x2 + eps
    if diff.ndim == 0:
        diff = diff.reshape(1)
    return _p_norm(diff, p, -1, bool(keepdim))


# ---- RMS norm ----------------------------------------------------------------------------------


def _trailing(op: str, x: Tensor, normalized_shape) -> tuple:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
        raise ValueError(f"{op}: normalized_shape {shape} must match the trailing dims of the "
                         f"input shape {tuple(x.shape)}")
    return shape


def _rms_norm_np(x, normalized_shape, weight=None, eps=None):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    eps = np.finfo(x.dtype).eps if eps is None else eps
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y if weight is None else y * weight


@composite("rms_norm", _rms_norm_np, samples=lambda: [
    ((_rng.standard_normal((3, 4)), (4,), _rng.standard_normal(4)), {}),
    ((_rng.standard_normal((2, 3, 2)), (3, 2)), {"eps": 1e-3}),
])
def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """input / sqrt(mean(input^2) + eps) * weight, the mean over the trailing normalized_shape
    dims; eps=None is the dtype's machine epsilon.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> [round(v, 4) for v in F.rms_norm(st.tensor([[3.0, 4.0]]), (2,)).tolist()[0]]
        [0.8485, 1.1314]
    """
    op = "rms_norm"
    _float_tensor(op, input)
    shape = _trailing(op, input, normalized_shape)
    if weight is not None:
        expect_tensor(op, weight, "weight")
        if tuple(weight.shape) != shape:
            raise ValueError(f"{op}: weight must have shape {shape}, got {tuple(weight.shape)}")
    eps = float(np.finfo(input.dtype.name).eps) if eps is None else _number(op, "eps", eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = input * ((input * input).mean(dim=dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


# ---- instance norm -----------------------------------------------------------------------------


def _instance_norm_np(x, running_mean=None, running_var=None, weight=None, bias=None,
                      use_input_stats=True, momentum=0.1, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if use_input_stats:
        mean = x.mean(axis=axes, keepdims=True)
        var = x.var(axis=axes, keepdims=True)
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    y = (x - mean) / np.sqrt(var + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


@composite("instance_norm", _instance_norm_np, samples=lambda: [
    ((_rng.standard_normal((2, 3, 4)),), {}),
    ((_rng.standard_normal((2, 3, 2, 3)), None, None, _rng.standard_normal(3),
      _rng.standard_normal(3)), {}),
    ((_rng.standard_normal((2, 3, 4)), _rng.standard_normal(3), _rng.uniform(0.5, 2, 3)),
     {"use_input_stats": False}),
])
def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample of (N, C, ...) over its spatial dims.

    With use_input_stats (the default) each instance's own mean and biased variance are used,
    and running_mean/running_var, when given, are updated in place with momentum from the
    batch average of those statistics (the variance unbiased); otherwise the running
    statistics normalise.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> [round(v, 4) for v in F.instance_norm(st.tensor([[[1.0, 3.0]]])).reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    op = "instance_norm"
    _float_tensor(op, input)
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input of at least 3 dims (N, C, ...), got shape "
                         f"{tuple(input.shape)}")
    c = input.shape[1]
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        if t is not None:
            expect_tensor(op, t, name)
            if tuple(t.shape) != (c,):
                raise ValueError(f"{op}: {name} must have shape ({c},), got {tuple(t.shape)}")
    momentum, eps = _number(op, "momentum", momentum), _number(op, "eps", eps)
    dims = tuple(range(2, input.ndim))
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        count = input.numel() // max(input.shape[0] * c, 1)
        if count <= 1:
            raise ValueError(f"{op}: expected more than 1 spatial element per channel when "
                             f"training, got input of shape {tuple(input.shape)}")
        mean = input.mean(dim=dims, keepdim=True)
        var = ((input - mean) ** 2).mean(dim=dims, keepdim=True)
        if running_mean is not None or running_var is not None:
            with _ag.no_grad():
                m = mean.detach().reshape(input.shape[0], c).mean(dim=0)
                v = var.detach().reshape(input.shape[0], c).mean(dim=0) * (count / (count - 1))
                if running_mean is not None:
                    running_mean.copy_(running_mean * (1 - momentum) + m * momentum)
                if running_var is not None:
                    running_var.copy_(running_var * (1 - momentum) + v * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: use_input_stats=False needs running_mean and running_var")
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    out = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


# ---- embedding bag -----------------------------------------------------------------------------


def _bags(op: str, input: Tensor, offsets, include_last_offset: bool) -> tuple:
    """(flat indices, bag of each index, (start, end) of each bag, number of bags) from a 2-D
    input (one bag a row) or a 1-D input cut at offsets."""
    if input.dtype.is_floating_point or input.dtype.name == "bool":
        raise TypeError(f"{op}: input must be an integer tensor of indices, got "
                        f"{input.dtype.name}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None when input is 2-D (one bag per row)")
        b, length = input.shape
        return (input.reshape(-1), [i // length for i in range(b * length)],
                [(k * length, (k + 1) * length) for k in range(b)], b)
    if input.ndim != 1:
        raise ValueError(f"{op}: input must be 1-D (with offsets) or 2-D, got shape "
                         f"{tuple(input.shape)}")
    if offsets is None:
        raise ValueError(f"{op}: offsets is required when input is 1-D")
    expect_tensor(op, offsets, "offsets")
    if offsets.ndim != 1 or offsets.dtype.is_floating_point:
        raise ValueError(f"{op}: offsets must be a 1-D integer tensor, got shape "
                         f"{tuple(offsets.shape)} of {offsets.dtype.name}")
    starts = offsets.tolist()
    n = input.shape[0]
    if include_last_offset:
        if not starts:
            raise ValueError(f"{op}: offsets must not be empty with include_last_offset=True")
        starts, ends = starts[:-1], starts[1:]
        ends = ends[:-1] + [min(ends[-1], n)] if ends else []
    else:
        ends = starts[1:] + [n]
    if starts and starts[0] != 0:
        raise ValueError(f"{op}: the first offset must be 0, got {starts[0]}")
    if any(a > b for a, b in zip(starts, ends)) or any(not 0 <= v <= n for v in starts):
        raise ValueError(f"{op}: offsets must be non-decreasing and within [0, {n}], got "
                         f"{offsets.tolist()}")
    bag = [0] * n
    for k, (a, b) in enumerate(zip(starts, ends)):
        bag[a:b] = [k] * (b - a)
    # indices past the last bag's end (include_last_offset) belong to no bag
    used = ends[-1] if ends else 0
    return input[:used], bag[:used], list(zip(starts, ends)), len(starts)


def _embedding_bag_np(input, weight, offsets=None, max_norm=None, norm_type=2.0,
                      scale_grad_by_freq=False, mode="mean", sparse=False,
                      per_sample_weights=None, include_last_offset=False, padding_idx=None):
    if input.ndim == 2:
        bags = [(list(row), None if per_sample_weights is None else list(w))
                for row, w in zip(input, per_sample_weights if per_sample_weights is not None
                                  else input)]
    else:
        ends = list(offsets[1:]) + [len(input)]
        if include_last_offset:
            ends = list(offsets[1:])
        bags = [(list(input[a:b]), None if per_sample_weights is None
                 else list(per_sample_weights[a:b])) for a, b in zip(offsets, ends)]
    out = np.zeros((len(bags), weight.shape[1]), dtype=weight.dtype)
    for k, (idx, w) in enumerate(bags):
        keep = [i for i, j in enumerate(idx) if j != padding_idx]
        if not keep:
            continue
        rows = weight[[idx[i] for i in keep]]
        if w is not None:
            rows = rows * np.array([w[i] for i in keep])[:, None]
        out[k] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


_E = _rng.standard_normal((6, 3))


@composite("embedding_bag", _embedding_bag_np, onnx="Gather", samples=lambda: [
    ((np.array([0, 2, 1, 5, 2]), _E, np.array([0, 2, 2])), {"mode": "sum"}),
    ((np.array([[0, 2, 1], [5, 2, 3]]), _E), {"mode": "mean", "padding_idx": 2}),
    ((np.array([0, 2, 1, 5, 2]), _E, np.array([0, 1, 3, 5])),
     {"mode": "max", "include_last_offset": True}),
    ((np.array([0, 2, 1, 5]), _E, np.array([0, 3]), None, 2.0, False, "sum", False,
      _rng.standard_normal(4)), {}),
])
def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2.0,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of the embedding rows of each bag of indices, without building
    the per-index embeddings' tensor of the bags: (B, embedding_dim).

    A 2-D input holds one bag per row; a 1-D input is cut into bags at offsets (with
    include_last_offset, the last offset ends the last bag). per_sample_weights (mode "sum"
    only) scales each row; padding_idx entries are left out of their bag; an empty bag is
    zeros.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> w = st.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> F.embedding_bag(st.tensor([0, 1, 2]), w, st.tensor([0, 2])).tolist()
        [[2.0, 3.0], [5.0, 6.0]]
    """
    op = "embedding_bag"
    expect_tensor(op, input)
    _float_tensor(op, weight, "weight")
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got "
                         f"shape {tuple(weight.shape)}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if max_norm is not None:
        raise NotImplementedError(f"{op}: max_norm is not supported")
    num, dim = weight.shape
    padding_idx = padding_index(op, padding_idx, num)
    flat, bag, spans, b = _bags(op, input, offsets, include_last_offset)
    if per_sample_weights is not None:
        _float_tensor(op, per_sample_weights, "per_sample_weights")
        if mode != "sum":
            raise ValueError(f"{op}: per_sample_weights is only supported for mode='sum', got "
                             f"mode={mode!r}")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"{op}: per_sample_weights of shape "
                             f"{tuple(per_sample_weights.shape)} must match input of shape "
                             f"{tuple(input.shape)}")
    count = flat.numel()
    if count == 0:
        return _zeros(b, dim, dtype=weight.dtype, device=weight.device) + weight.sum() * 0.0
    flat = flat.to("int64")
    with _ag.no_grad():
        bad = (flat < 0) | (flat >= num)
        if bad.any().item():
            raise IndexError(f"{op}: index {flat[bad][0].item()} out of range for {num} "
                             f"embeddings")
    keep = None if padding_idx is None else (flat != padding_idx)
    rows = index_select(weight, 0, flat)
    if mode == "max":
        if keep is not None:
            rows = where(keep.reshape(count, 1), rows, float("-inf"))
        # each bag padded to the longest with a row of -inf (index `count`), then one amax
        width = max((e - a for a, e in spans), default=0)
        pos = [list(range(a, e)) + [count] * (width - e + a) for a, e in spans]
        if b == 0 or width == 0:
            return _zeros(b, dim, dtype=weight.dtype, device=weight.device) + rows.sum() * 0.0
        padded = cat([rows, _zeros(1, dim, dtype=weight.dtype, device=weight.device)
                      + float("-inf")], 0)
        at = _tensor_of(pos, dtype="int64", device=weight.device).reshape(-1)
        picked = index_select(padded, 0, at).reshape(b, width, dim).amax(dim=1)
        return where(picked == float("-inf"), 0.0, picked)  # empty bags are zeros
    bag_of = _tensor_of(bag, dtype="int64", device=weight.device)
    scale = None if keep is None else keep.to(weight.dtype)
    if per_sample_weights is not None:
        psw = per_sample_weights.reshape(-1)[:count]
        scale = psw if scale is None else scale * psw
    src = rows if scale is None else rows * scale.reshape(count, 1)
    total = _zeros(b, dim, dtype=weight.dtype, device=weight.device).index_add(0, bag_of, src)
    if mode == "sum":
        return total
    ones = (_zeros(count, dtype=weight.dtype, device=weight.device) + 1.0) if keep is None \
        else keep.to(weight.dtype)
    n_in_bag = _zeros(b, dtype=weight.dtype, device=weight.device).index_add(0, bag_of, ones)
    return total / n_in_bag.clamp(min=1.0).reshape(b, 1)


# ---- bilinear ----------------------------------------------------------------------------------


def _bilinear_np(x1, x2, weight, bias=None):
    y = np.einsum("...i,kij,...j->...k", x1, weight, x2)
    return y if bias is None else y + bias


@composite("bilinear", _bilinear_np, samples=lambda: [
    ((_rng.standard_normal((4, 3)), _rng.standard_normal((4, 2)),
      _rng.standard_normal((5, 3, 2)), _rng.standard_normal(5)), {}),
    ((_rng.standard_normal((2, 3, 3)), _rng.standard_normal((2, 3, 2)),
      _rng.standard_normal((4, 3, 2))), {}),
])
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None
             ) -> Tensor:
    """y[..., k] = input1 @ weight[k] @ input2 + bias[k], weight of shape
    (out_features, in1_features, in2_features).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.bilinear(st.ones(1, 2), st.ones(1, 3), st.ones(4, 2, 3)).tolist()
        [[6.0, 6.0, 6.0, 6.0]]
    """
    op = "bilinear"
    _float_tensor(op, input1, "input1")
    _float_tensor(op, input2, "input2")
    _float_tensor(op, weight, "weight")
    if weight.ndim != 3:
        raise ValueError(f"{op}: weight must be 3-D (out, in1, in2), got shape "
                         f"{tuple(weight.shape)}")
    out, in1, in2 = weight.shape
    if input1.ndim == 0 or input1.shape[-1] != in1 or input2.ndim == 0 or (
            input2.shape[-1] != in2) or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ValueError(f"{op}: inputs of shapes {tuple(input1.shape)} and "
                         f"{tuple(input2.shape)} do not match weight of shape "
                         f"{tuple(weight.shape)} (last dims {in1} and {in2}, the rest equal)")
    if bias is not None:
        _float_tensor(op, bias, "bias")
        if tuple(bias.shape) != (out,):
            raise ValueError(f"{op}: bias must have shape ({out},), got {tuple(bias.shape)}")
    lead = tuple(input1.shape[:-1])
    a = input1.reshape(-1, in1)
    mixed = matmul(a, weight.permute(1, 0, 2).reshape(in1, out * in2)).reshape(-1, out, in2)
    y = (mixed * input2.reshape(-1, 1, in2)).sum(dim=2)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out)




# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def _embedding_bag_onnx(cls, b, args, attrs, outs):
    """Gather of the rows, then one reduction over the members of each bag. The rows of a 2-D
    input are its bags; for a 1-D input the graph compares each position with the bags'
    [offset, next offset) ranges, so both the indices and the offsets may change length. Left
    out members (padding_idx, other bags) are masked with Where before the reduction."""
    from ..onnx._export import onnx_type
    from .reduce import onnx_reduce
    from .shape import _INT64_MAX, onnx_axes_node

    x, w, offsets = args["input"], args["weight"], args["offsets"]
    mode, psw, pad = args["mode"], args["per_sample_weights"], args["padding_idx"]
    if x.numel() == 0:
        return NotImplemented
    int64 = onnx_type(_dt.int64)

    def as_int64(t):
        name = b.value(t)
        return name if t.dtype is _dt.int64 else b.node("Cast", [name], to=int64)[0]

    def reduce(op, name, keep=False):
        out = b.fresh(op)
        onnx_reduce(b, op, name, [1], keep, [out])
        return out

    ids = as_int64(x)
    (rows,) = b.node("Gather", [b.value(w), ids], axis=0)
    scale = None if psw is None else b.value(psw)
    member = None
    if pad is not None:  # positions holding padding_idx belong to no bag
        pad = pad + w.shape[0] if pad < 0 else pad
        (member,) = b.node("Not", [b.node("Equal", [ids, b.ints([pad])])[0]])
    if x.ndim == 2:  # (B, L, D): the members of bag k are row k
        if member is not None:
            member = onnx_axes_node(b, "Unsqueeze", member, [2])
        if scale is not None:
            scale = onnx_axes_node(b, "Unsqueeze", scale, [2])
    else:  # (N, D) rows; member[k, i]: offsets[k] <= i < the next offset (or N)
        offs = as_int64(offsets)
        (n,) = b.node("Shape", [ids])
        if args["include_last_offset"]:
            (starts,) = b.node("Slice", [offs, b.ints([0]), b.ints([-1])])
            (ends,) = b.node("Slice", [offs, b.ints([1]), b.ints([_INT64_MAX])])
        else:
            starts = offs
            (rest,) = b.node("Slice", [offs, b.ints([1]), b.ints([_INT64_MAX])])
            (ends,) = b.node("Concat", [rest, n], axis=0)
        (count,) = b.node("Gather", [n, b.const(np.asarray(0, dtype=np.int64))], axis=0)
        (pos,) = b.node("Range", [b.const(np.asarray(0, dtype=np.int64)), count,
                                  b.const(np.asarray(1, dtype=np.int64))])
        pos = onnx_axes_node(b, "Unsqueeze", pos, [0])  # (1, N)
        (after,) = b.node("Not", [b.node("Greater", [onnx_axes_node(
            b, "Unsqueeze", starts, [1]), pos])[0]])
        (before,) = b.node("Less", [pos, onnx_axes_node(b, "Unsqueeze", ends, [1])])
        (inside,) = b.node("And", [after, before])  # (B, N)
        if member is not None:
            (inside,) = b.node("And", [inside, onnx_axes_node(b, "Unsqueeze", member, [0])])
        member = onnx_axes_node(b, "Unsqueeze", inside, [2])  # (B, N, 1)
        rows = onnx_axes_node(b, "Unsqueeze", rows, [0])  # (1, N, D)
        if scale is not None:
            (scale,) = b.node("Reshape", [scale, b.ints([1, -1, 1])])
    zero = b.scalar(0.0, w)
    if mode == "max":
        if member is None:
            b.node("Identity", [reduce("ReduceMax", rows)], outputs=outs)
            return None
        (picked,) = b.node("Where", [member, rows, b.scalar(float("-inf"), w)])
        top = reduce("ReduceMax", picked)
        (empty,) = b.node("Equal", [top, b.scalar(float("-inf"), w)])  # an empty bag: zeros
        b.node("Where", [empty, zero, top], outputs=outs)
        return None
    if scale is not None:
        (rows,) = b.node("Mul", [rows, scale])
    if member is None:
        b.node("Identity", [reduce("ReduceSum" if mode == "sum" else "ReduceMean", rows)],
               outputs=outs)
        return None
    total = reduce("ReduceSum", b.node("Where", [member, rows, zero])[0])
    if mode == "sum":
        b.node("Identity", [total], outputs=outs)
        return None
    sizes = reduce("ReduceSum", b.node("Cast", [member], to=onnx_type(w.dtype))[0])
    (sizes,) = b.node("Max", [sizes, b.scalar(1.0, w)])  # an empty bag's mean is zeros
    b.node("Div", [total, sizes], outputs=outs)  # (B, D) / (B, 1)
    return None


REGISTRY["embedding_bag"].onnx_export = classmethod(_embedding_bag_onnx)

__all__: list[str] = []  # nn.functional names, not st.* ones
