"""`nn.utils` helpers: the joint norm of many gradients and clipping by a norm already
measured (the two halves of clip_grad_norm_), and folding an eval-mode batch normalisation
into the convolution or linear layer before it."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable

from .. import creation
from ..autograd import no_grad
from ..ops import clamp, norm, stack
from ..tensor import Tensor
from .module import Module, Parameter


def _tensor_list(op: str, tensors) -> list[Tensor]:
    if isinstance(tensors, Tensor):
        return [tensors]
    out = []
    for t in tensors:
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__}")
        out.append(t)
    return out


def get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The norm of the given tensors (usually gradients) taken together as one vector.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils import get_total_norm
        >>> get_total_norm([st.tensor([3.0]), st.tensor([4.0])]).item()
        5.0
    """
    op = "get_total_norm"
    ts = _tensor_list(op, tensors)
    norm_type = float(norm_type)
    if not ts:
        return creation.tensor(0.0)
    with no_grad():
        dtype = ts[0].dtype
        each = [norm(t.detach(), norm_type) for t in ts]
        each = [n if n.dtype is dtype else n.to(dtype=dtype) for n in each]
        total = each[0] if len(each) == 1 else norm(stack(each), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"{op}: the total norm of order {norm_type} is non-finite; set "
                           "error_if_nonfinite=False to return it anyway")
    return total


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                          total_norm: Tensor | float, foreach: bool | None = None) -> None:
    """Scale the parameters' gradients in place by max_norm / (total_norm + 1e-6), when that
    is below 1 (total_norm as measured by get_total_norm).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils import clip_grads_with_norm_, get_total_norm
        >>> w = st.zeros(2, requires_grad=True); w.grad = st.tensor([3.0, 4.0])
        >>> clip_grads_with_norm_([w], 1.0, get_total_norm([w.grad]))
        >>> [round(v, 4) for v in w.grad.tolist()]
        [0.6, 0.8]
    """
    op = "clip_grads_with_norm_"
    params = _tensor_list(op, parameters)
    max_norm = float(max_norm)
    if math.isnan(max_norm) or max_norm < 0:
        raise ValueError(f"{op}: max_norm must be a non-negative number, got {max_norm}")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.detach().mul_(coef if isinstance(coef, Tensor) else float(coef))


def _bn_scale(op, rm, rv, eps, bn_w, bn_b, like: Tensor):
    for name, t in (("bn_rm", rm), ("bn_rv", rv)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor (the running statistics), got "
                            f"{type(t).__name__}")
    c = rm.shape[0]
    if bn_w is None:
        bn_w = creation.ones(c, dtype=like.dtype, device=like.device)
    if bn_b is None:
        bn_b = creation.zeros(c, dtype=like.dtype, device=like.device)
    return bn_w * (rv + float(eps)).rsqrt(), bn_b


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor,
                         bn_eps: float, bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple:
    """The weight and bias of one convolution computing conv followed by an eval-mode batch
    norm (running statistics bn_rm, bn_rv; affine bn_w, bn_b), as Parameters.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils import fuse_conv_bn_weights
        >>> w, b = fuse_conv_bn_weights(st.ones(2, 1, 1, 1), None, st.zeros(2), st.ones(2) * 3,
        ...                             1.0, st.ones(2), st.tensor([1.0, 2.0]))
        >>> w.reshape(-1).tolist(), b.tolist()
        ([0.5, 0.5], [1.0, 2.0])
    """
    op = "fuse_conv_bn_weights"
    if not isinstance(conv_w, Tensor) or conv_w.ndim < 3:
        raise ValueError(f"{op}: conv_w must be a convolution weight (3-d or more)")
    out_dim = 1 if transpose else 0  # a transposed convolution's outputs are weight dim 1
    if bn_rm.shape[0] != conv_w.shape[out_dim]:
        raise ValueError(f"{op}: batch norm of {bn_rm.shape[0]} features does not match the "
                         f"convolution weight of shape {tuple(conv_w.shape)} "
                         f"(transpose={transpose})")
    with no_grad():
        scale, bn_b = _bn_scale(op, bn_rm, bn_rv, bn_eps, bn_w, bn_b, conv_w)
        if conv_b is None:
            conv_b = creation.zeros(bn_rm.shape[0], dtype=conv_w.dtype, device=conv_w.device)
        shape = [1] * conv_w.ndim
        shape[out_dim] = -1
        w = conv_w * scale.reshape(shape).to(dtype=conv_w.dtype)
        b = (conv_b - bn_rm) * scale + bn_b
    return Parameter(w.detach(), conv_w.requires_grad), Parameter(b.detach(),
                                                                   conv_w.requires_grad)


def fuse_conv_bn_eval(conv: Module, bn: Module, transpose: bool = False) -> Module:
    """A copy of conv that computes bn(conv(x)) with both in eval mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> from singa_tensor.nn.utils import fuse_conv_bn_eval
        >>> conv, bn = nn.Conv2d(2, 3, 3).eval(), nn.BatchNorm2d(3).eval()
        >>> x = st.randn(1, 2, 5, 5)
        >>> bool(st.allclose(fuse_conv_bn_eval(conv, bn)(x), bn(conv(x)), atol=1e-5))
        True
    """
    op = "fuse_conv_bn_eval"
    if conv.training or bn.training:
        raise RuntimeError(f"{op}: fusion only works in eval mode (call .eval() on both)")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"{op}: the batch norm must track running statistics")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor | None,
                           bn_b: Tensor | None) -> tuple:
    """The weight and bias of one linear layer computing linear followed by an eval-mode
    batch norm, as Parameters.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.nn.utils import fuse_linear_bn_weights
        >>> w, b = fuse_linear_bn_weights(st.ones(2, 2), st.ones(2), st.ones(2), st.ones(2) * 3,
        ...                               1.0, None, None)
        >>> w.tolist(), b.tolist()
        ([[0.5, 0.5], [0.5, 0.5]], [0.0, 0.0])
    """
    op = "fuse_linear_bn_weights"
    if not isinstance(linear_w, Tensor) or linear_w.ndim != 2:
        raise ValueError(f"{op}: linear_w must be a 2-d weight")
    if bn_rm.shape[0] not in (linear_w.shape[0], 1):
        raise ValueError(f"{op}: batch norm of {bn_rm.shape[0]} features does not match the "
                         f"{linear_w.shape[0]} outputs of the linear layer")
    with no_grad():
        scale, bn_b = _bn_scale(op, bn_rm, bn_rv, bn_eps, bn_w, bn_b, linear_w)
        if linear_b is None:
            linear_b = creation.zeros(linear_w.shape[0], dtype=linear_w.dtype,
                                      device=linear_w.device)
        w = linear_w * scale.unsqueeze(-1)
        b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(w.detach(), linear_w.requires_grad), Parameter(b.detach(),
                                                                     linear_w.requires_grad)


def fuse_linear_bn_eval(linear: Module, bn: Module) -> Module:
    """A copy of linear that computes bn(linear(x)) with both in eval mode.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> from singa_tensor.nn.utils import fuse_linear_bn_eval
        >>> fc, bn = nn.Linear(3, 2).eval(), nn.BatchNorm1d(2).eval()
        >>> x = st.randn(4, 3)
        >>> bool(st.allclose(fuse_linear_bn_eval(fc, bn)(x), bn(fc(x)), atol=1e-5))
        True
    """
    op = "fuse_linear_bn_eval"
    if linear.training or bn.training:
        raise RuntimeError(f"{op}: fusion only works in eval mode (call .eval() on both)")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"{op}: the batch norm must track running statistics")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ValueError(f"{op}: linear.out_features ({linear.out_features}) must equal "
                         f"bn.num_features ({bn.num_features}) or bn.num_features must be 1")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


__all__ = ["clip_grads_with_norm_", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "get_total_norm"]
