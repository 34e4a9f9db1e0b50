"""Normalisation: batch, layer and group norm, as compositions of reductions and arithmetic
(so their gradients, to any order, come from those ops)."""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from ..tensor import Tensor
from ._registry import OpSpec, expect_tensor, register


def _check_affine(op: str, t, shape: tuple, name: str) -> None:
    if t is not None:
        expect_tensor(op, t, name)
        if t.shape != shape:
            raise ValueError(f"{op}: {name} must have shape {shape}, got {t.shape}")


def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) of (N, C, ...) over the batch and spatial dims.

    In training (or without running statistics) the batch's own mean and biased variance are
    used, and running_mean/running_var (if given) are updated in place with momentum, the
    variance unbiased, as PyTorch does. Otherwise the running statistics are used.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0], [3.0]])
        >>> [round(v, 4) for v in st.batch_norm(x, None, None, training=True).reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    op = "batch_norm"
    expect_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of at least 2 dims (N, C, ...), got {x.shape}")
    c = x.shape[1]
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_affine(op, t, (c,), name)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, c) + (1,) * (x.ndim - 2)
    use_batch = training or running_mean is None or running_var is None
    if use_batch:
        count = x.numel() // c
        if count <= 1:
            raise ValueError(f"{op}: expected more than 1 value per channel when training, got "
                             f"input shape {x.shape}")
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        if training and running_mean is not None and running_var is not None:
            with _ag.no_grad():
                running_mean.mul_(1.0 - momentum).add_(mean.reshape(c).detach() * momentum)
                unbiased = var.reshape(c).detach() * (count / (count - 1))
                running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
    else:
        mean = running_mean.reshape(*shape)
        var = running_var.reshape(*shape)
    out = (x - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing normalized_shape dims of x (biased variance).

    Example:
        >>> import singa_tensor as st
        >>> [round(v, 4) for v in st.layer_norm(st.tensor([[1.0, 3.0]]), (2,))[0].tolist()]
        [-1.0, 1.0]
    """
    op = "layer_norm"
    expect_tensor(op, x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or tuple(x.shape[x.ndim - k:]) != shape or x.ndim < k:
        raise ValueError(f"{op}: normalized_shape {shape} must match the trailing dims of the "
                         f"input shape {x.shape}")
    _check_affine(op, weight, shape, "weight")
    _check_affine(op, bias, shape, "bias")
    dims = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    out = (x - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def group_norm(x: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise (N, C, ...) over groups of C/num_groups channels and the spatial dims.

    Example:
        >>> import singa_tensor as st
        >>> y = st.group_norm(st.tensor([[[1.0], [3.0]]]), 1)
        >>> [round(v, 4) for v in y.reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    op = "group_norm"
    expect_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of at least 2 dims (N, C, ...), got {x.shape}")
    n, c = x.shape[0], x.shape[1]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise ValueError(f"{op}: num_groups={num_groups!r} must be a positive divisor of the "
                         f"{c} channels")
    _check_affine(op, weight, (c,), "weight")
    _check_affine(op, bias, (c,), "bias")
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(dim=2, keepdim=True)
    var = ((g - mean) ** 2).mean(dim=2, keepdim=True)
    out = ((g - mean) * (var + eps).rsqrt()).reshape(*x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


# ---- numpy references and the registry's view --------------------------------------------------


def _norm_np(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def _batch_norm_np(x, running_mean, running_var, weight=None, bias=None, training=False,
                   momentum=0.1, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training or running_mean is None:
        out = _norm_np(x, (0,) + tuple(range(2, x.ndim)), eps)
    else:
        out = (x - running_mean.reshape(shape)) / np.sqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _layer_norm_np(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    out = _norm_np(x, tuple(range(x.ndim - k, x.ndim)), eps)
    return out * (1 if weight is None else weight) + (0 if bias is None else bias)


def _group_norm_np(x, num_groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    out = _norm_np(x.reshape(n, num_groups, -1), (2,), eps).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _composite(name, onnx, fn, reference, samples):
    spec = type("".join(p.title() for p in name.split("_")), (OpSpec,), {
        "name": name, "onnx": onnx, "composite": True, "fn": staticmethod(fn),
        "reference": staticmethod(reference), "samples": staticmethod(samples),
    })
    return register(spec)


_rng = np.random.default_rng(30)
_x = _rng.standard_normal((3, 4, 2, 3))
_c = _rng.standard_normal(4)
_composite("batch_norm", "BatchNormalization", batch_norm, _batch_norm_np, lambda: [
    ((_x, None, None, _c, _c + 1.0), {"training": True}),
    ((_x, _c, np.abs(_c) + 0.5, _c, None), {"training": False}),
])
_composite("layer_norm", "LayerNormalization", layer_norm, _layer_norm_np, lambda: [
    ((_x, (2, 3), _rng.standard_normal((2, 3)), _rng.standard_normal((2, 3))), {}),
    ((_x, 3), {})])
_composite("group_norm", "GroupNormalization", group_norm, _group_norm_np, lambda: [
    ((_x, 2, _c, _c), {}), ((_x, 4), {})])

__all__ = ["batch_norm", "group_norm", "layer_norm"]
