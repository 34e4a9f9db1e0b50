"""More losses of nn.functional (PyTorch names, arguments and semantics): margin and embedding
losses, Poisson and Gaussian likelihoods, Huber, multi-label and multi-class margins, triplet
losses and CTC; plus the distance and normalisation functions defined in ops/more_nn.py.

Every loss is a composition of registered ops, so gradients (and second derivatives) come from
autograd; arguments are checked here first and bad ones raise errors naming the loss.
"""

from __future__ import annotations

import math
from typing import Callable

import singa_tensor as st
from singa_tensor.autograd import is_grad_enabled
from singa_tensor.autograd import no_grad as _no_grad
from singa_tensor.ops.more_nn import (
    bilinear,
    cosine_similarity,
    embedding_bag,
    instance_norm,
    normalize,
    pairwise_distance,
    rms_norm,
)
from singa_tensor.ops.more_sampling import affine_grid, grid_sample
from singa_tensor.tensor import Tensor

from ._functional_losses import (
    _check_float,
    _check_reduction,
    _check_tensor,
    _pointwise_pair,
    _reduce,
    _same_device,
)


def _margin(op: str, margin, name: str = "margin") -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float)):
        raise TypeError(f"{op}: {name} must be a number, got {type(margin).__name__}")
    return float(margin)


def _same_shape(op: str, **tensors) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        desc = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise ValueError(f"{op}: expected inputs of the same shape, got {desc}")


def _signed_target(op: str, target, like: Tensor) -> Tensor:
    _check_tensor(op, "target", target)
    _same_device(op, like, target)
    return target.to(like.dtype)


# ---- margin losses on pairs --------------------------------------------------------------------


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.margin_ranking_loss(st.tensor([1.0, 2.0]), st.tensor([2.0, 1.0]),
        ...                       st.tensor([1.0, 1.0]), reduction="none").tolist()
        [1.0, 0.0]
    """
    op = "margin_ranking_loss"
    _check_reduction(op, reduction)
    margin = _margin(op, margin)
    _check_float(op, "input1", input1)
    _check_float(op, "input2", input2)
    target = _signed_target(op, target, input1)
    _same_shape(op, input1=input1, input2=input2, target=target)
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0.0), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         reduction: str = "mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where target is -1.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.hinge_embedding_loss(st.tensor([0.3, 0.3]), st.tensor([1.0, -1.0]),
        ...                        reduction="none").tolist()
        [0.30000001192092896, 0.699999988079071]
    """
    op = "hinge_embedding_loss"
    _check_reduction(op, reduction)
    margin = _margin(op, margin)
    _check_float(op, "input", input)
    target = _signed_target(op, target, input)
    _same_shape(op, input=input, target=target)
    zero = input * 0.0
    loss = (st.where(target != 1.0, (margin - input).clamp(min=0.0), zero)
            + st.where(target != -1.0, input, zero))
    return _reduce(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), target in {1, -1}.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.soft_margin_loss(st.tensor([0.0]), st.tensor([1.0])).item(), 4)
        0.6931
    """
    op = "soft_margin_loss"
    _check_reduction(op, reduction)
    _check_float(op, "input", input)
    target = _signed_target(op, target, input)
    _same_shape(op, input=input, target=target)
    return _reduce(st.softplus(-target * input), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: str = "mean") -> Tensor:
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; the
    cosine is over the last dim of (N, D) or (D,) inputs.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.tensor([[1.0, 0.0], [1.0, 0.0]])
        >>> F.cosine_embedding_loss(x, x, st.tensor([1.0, -1.0]), reduction="none").tolist()
        [0.0, 1.0]
    """
    op = "cosine_embedding_loss"
    _check_reduction(op, reduction)
    margin = _margin(op, margin)
    _check_float(op, "input1", input1)
    _check_float(op, "input2", input2)
    _same_shape(op, input1=input1, input2=input2)
    if input1.ndim not in (1, 2):
        raise ValueError(f"{op}: expected 1-D or 2-D inputs, got shape {tuple(input1.shape)}")
    target = _signed_target(op, target, input1)
    if tuple(target.shape) != tuple(input1.shape[:-1]):
        raise ValueError(f"{op}: target of shape {tuple(target.shape)} must have shape "
                         f"{tuple(input1.shape[:-1])}")
    eps = 1e-12
    dot = (input1 * input2).sum(dim=-1)
    cos = dot / (((input1 * input1).sum(dim=-1) + eps) * ((input2 * input2).sum(dim=-1) + eps)
                 ).sqrt()
    zero = cos * 0.0
    loss = (st.where(target == 1.0, 1.0 - cos, zero)
            + st.where(target == -1.0, (cos - margin).clamp(min=0.0), zero))
    return _reduce(loss, reduction)


# ---- regression likelihoods --------------------------------------------------------------------


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), d = input - target.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.huber_loss(st.tensor([0.5, 3.0]), st.zeros(2), reduction="none", delta=2.0).tolist()
        [0.125, 4.0]
    """
    op = "huber_loss"
    _check_reduction(op, reduction)
    delta = _margin(op, delta, "delta")
    if not delta > 0:
        raise ValueError(f"{op}: delta must be positive, got {delta}")
    input, target = _pointwise_pair(op, input, target)
    z = (input - target).abs()
    return _reduce(st.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input with log_input, else
    input - target * log(input + eps); full adds Stirling's term for target > 1.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.poisson_nll_loss(st.tensor([0.0]), st.tensor([2.0])).item()
        1.0
    """
    op = "poisson_nll_loss"
    if size_average is not None or reduce is not None:
        raise TypeError(f"{op}: size_average and reduce are deprecated and not supported; "
                        f"use reduction")
    _check_reduction(op, reduction)
    eps = _margin(op, eps, "eps")
    input, target = _pointwise_pair(op, input, target)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1.0
        t = st.where(big, target, 1.0)
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + st.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) with
    full). var has input's shape, or one dim fewer, or a last dim of 1 (one variance per
    sample); the clamp leaves var's gradient untouched, as in PyTorch.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> F.gaussian_nll_loss(st.tensor([1.0]), st.tensor([3.0]), st.tensor([1.0])).item()
        2.0
    """
    op = "gaussian_nll_loss"
    _check_reduction(op, reduction)
    eps = _margin(op, eps, "eps")
    _check_float(op, "input", input)
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError(f"{op}: var has negative entry/entries")
        # one variance for every element: a Python number, so no tensor of the input's shape
        # is made for it (an ONNX export would hold that tensor's traced shape)
        input, target = _pointwise_pair(op, input, target)
        v = max(float(var), eps)
        loss = 0.5 * (math.log(v) + (input - target) ** 2 / v)
        if full:
            loss = loss + 0.5 * math.log(2 * math.pi)
        return _reduce(loss, reduction)
    _check_float(op, "var", var)
    input, target = _pointwise_pair(op, input, target)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(f"{op}: var of shape {tuple(var.shape)} does not match input of "
                             f"shape {tuple(input.shape)}")
    with _no_grad():
        if (var < 0).any().item():
            raise ValueError(f"{op}: var has negative entry/entries")
    clamped = var.clamp(min=eps)
    # the clamp passes var's gradient through unchanged; without gradients (inference, ONNX
    # export) the clamped value is all there is, and a detached tensor would be a constant
    var = var + (clamped - var).detach() if var.requires_grad and is_grad_enabled() \
        else clamped
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---- multi-class and multi-label margins -------------------------------------------------------


def _class_input(op: str, input, target) -> tuple:
    _check_float(op, "input", input)
    _check_tensor(op, "target", target)
    if target.dtype.is_floating_point or target.dtype is st.bool:
        raise TypeError(f"{op}: target must be an integer tensor, got {target.dtype.name}")
    _same_device(op, input, target)
    if input.ndim not in (1, 2):
        raise ValueError(f"{op}: expected a 1-D (C) or 2-D (N, C) input, got shape "
                         f"{tuple(input.shape)}")
    return (input.unsqueeze(0), True) if input.ndim == 1 else (input, False)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                reduction: str = "mean") -> Tensor:
    """-mean_c w_c (y log sigmoid(x) + (1 - y) log sigmoid(-x)) for each sample, then reduced
    over the samples.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> round(F.multilabel_soft_margin_loss(st.zeros(1, 2), st.tensor([[1.0, 0.0]])).item(),
        ...       4)
        0.6931
    """
    op = "multilabel_soft_margin_loss"
    _check_reduction(op, reduction)
    input, target = _pointwise_pair(op, input, target)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dim, got a 0-d tensor")
    loss = target * st.softplus(-input) + (1 - target) * st.softplus(input)
    if weight is not None:
        _check_float(op, "weight", weight)
        loss = loss * weight.to(input.dtype)
    return _reduce(loss.mean(dim=-1), reduction)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, reduction: str = "mean") -> Tensor:
    """sum over i != y of max(0, margin - x[y] + x[i])^p / C, scaled by weight[y].

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.tensor([[0.1, 0.2, 0.4, 0.8]])
        >>> round(F.multi_margin_loss(x, st.tensor([3])).item(), 4)
        0.325
    """
    op = "multi_margin_loss"
    _check_reduction(op, reduction)
    if p not in (1, 2) or isinstance(p, bool):
        raise ValueError(f"{op}: only p == 1 and p == 2 are supported, got {p!r}")
    margin = _margin(op, margin)
    x, squeeze = _class_input(op, input, target)
    n, c = x.shape
    t = target.reshape(-1)
    if t.numel() != n:
        raise ValueError(f"{op}: target of shape {tuple(target.shape)} does not match input "
                         f"of shape {tuple(input.shape)}")
    t = t.to(st.int64)
    with _no_grad():
        bad = (t < 0) | (t >= c)
        if n and bad.any().item():
            raise IndexError(f"{op}: target values must be in [0, {c}), got "
                             f"{t[bad][0].item()}")
    xy = st.gather(x, 1, t.reshape(n, 1))
    h = (margin - xy + x).clamp(min=0.0)
    if p == 2:
        h = h * h
    others = st.arange(c, device=x.device).reshape(1, c) != t.reshape(n, 1)
    h = st.where(others, h, 0.0)
    if weight is not None:
        _check_float(op, "weight", weight)
        if tuple(weight.shape) != (c,):
            raise ValueError(f"{op}: weight must have shape ({c},), got {tuple(weight.shape)}")
        h = h * st.gather(weight.to(x.dtype), 0, t).reshape(n, 1)
    loss = h.sum(dim=1) / c
    return _reduce(loss.reshape(()) if squeeze else loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C;
    each row of target lists class indices and ends at the first -1.

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> x = st.tensor([[0.1, 0.2, 0.4, 0.8]])
        >>> round(F.multilabel_margin_loss(x, st.tensor([[3, 0, -1, 1]])).item(), 4)
        0.85
    """
    op = "multilabel_margin_loss"
    _check_reduction(op, reduction)
    x, squeeze = _class_input(op, input, target)
    n, c = x.shape
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{op}: target of shape {tuple(target.shape)} must have the input's "
                         f"shape {tuple(input.shape)}")
    t = target.reshape(n, c)
    for row in t.tolist():
        for j in row:
            if j < 0:
                break
            if j >= c:
                raise IndexError(f"{op}: target value {j} out of range for {c} classes")
    # how often each class is a target, with tensor ops (an exported graph counts any batch):
    # a row lists classes up to its first negative entry
    t = t.to(st.int64)
    listed = (t < 0).to(st.int64).cumsum(1) == 0
    classes = st.arange(c, dtype=st.int64, device=x.device).reshape(1, 1, c)
    hits = st.logical_and(t.unsqueeze(2) == classes, listed.unsqueeze(2))
    cnt = hits.to(x.dtype).sum(dim=1)
    non = (cnt == 0).to(x.dtype)
    # h[n, j, i] = max(0, 1 - x[n, j] + x[n, i])
    h = (1.0 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0.0)
    loss = (h * cnt.unsqueeze(2) * non.unsqueeze(1)).sum(dim=(1, 2)) / c
    return _reduce(loss.reshape(()) if squeeze else loss, reduction)


# ---- triplet losses ----------------------------------------------------------------------------


def _triplet(op: str, anchor, positive, negative, dist: Callable, margin: float, swap: bool,
             reduction: str) -> Tensor:
    d_ap = dist(anchor, positive)
    d_an = dist(anchor, negative)
    if swap:
        d_an = st.minimum(d_an, dist(positive, negative))
    return _reduce((d_ap - d_an + margin).clamp(min=0.0), reduction)


def _triplet_inputs(op: str, anchor, positive, negative) -> None:
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_float(op, name, t)
    _same_device(op, anchor, positive, negative)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance; swap uses
    min(d(a, n), d(p, n)).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> a, p, n = st.tensor([[0.0, 0.0]]), st.tensor([[0.0, 1.0]]), st.tensor([[0.0, 3.0]])
        >>> round(F.triplet_margin_loss(a, p, n, margin=3.0, eps=0.0).item(), 4)
        1.0
    """
    op = "triplet_margin_loss"
    if size_average is not None or reduce is not None:
        raise TypeError(f"{op}: size_average and reduce are deprecated and not supported; "
                        f"use reduction")
    _check_reduction(op, reduction)
    margin = _margin(op, margin)
    _triplet_inputs(op, anchor, positive, negative)
    ndims = {anchor.ndim, positive.ndim, negative.ndim}
    if len(ndims) != 1 or anchor.ndim not in (1, 2):
        raise ValueError(f"{op}: anchor, positive and negative must all be 1-D or all 2-D, got "
                         f"shapes {tuple(anchor.shape)}, {tuple(positive.shape)}, "
                         f"{tuple(negative.shape)}")
    def dist(x, y):
        return pairwise_distance(x, y, p, eps)

    return _triplet(op, anchor, positive, negative, dist, margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Callable | None = None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with any distance function (default:
    pairwise_distance).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> a, p, n = st.tensor([[0.0, 0.0]]), st.tensor([[0.0, 1.0]]), st.tensor([[0.0, 3.0]])
        >>> l1 = lambda x, y: (x - y).abs().sum(dim=-1)
        >>> F.triplet_margin_with_distance_loss(a, p, n, distance_function=l1, margin=3.0).item()
        1.0
    """
    op = "triplet_margin_with_distance_loss"
    _check_reduction(op, reduction)
    margin = _margin(op, margin)
    if not margin > 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    if distance_function is not None and not callable(distance_function):
        raise TypeError(f"{op}: distance_function must be callable, got "
                        f"{type(distance_function).__name__}")
    _triplet_inputs(op, anchor, positive, negative)
    dist = pairwise_distance if distance_function is None else distance_function
    return _triplet(op, anchor, positive, negative, dist, margin, swap, reduction)


# ---- sampling ----------------------------------------------------------------------------------


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """softmax((logits + g) / tau) along dim, g drawn from the standard Gumbel distribution;
    with hard, the one-hot of its argmax in the forward and the soft sample's gradient in the
    backward (the straight-through estimator).

    Example:
        >>> import singa_tensor as st
        >>> import singa_tensor.nn.functional as F
        >>> y = F.gumbel_softmax(st.zeros(2, 5), tau=0.5, hard=True)
        >>> y.sum(dim=-1).tolist(), sorted(set(y.reshape(-1).tolist()))
        ([1.0, 1.0], [0.0, 1.0])
    """
    op = "gumbel_softmax"
    _check_float(op, "logits", logits)
    tau = _margin(op, tau, "tau")
    if not tau > 0:
        raise ValueError(f"{op}: tau must be positive, got {tau}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -max(logits.ndim, 1) <= dim < max(logits.ndim, 1):
        raise IndexError(f"{op}: dim {dim} out of range for a tensor of {logits.ndim} dims")
    with _no_grad():
        u = st.rand(*logits.shape, dtype=logits.dtype, device=logits.device)
        # -log(E), E ~ Exp(1) = -log(U); the clamp keeps log() away from 0 and 1
        g = -(-(u.clamp(min=1e-20, max=1.0 - 1e-7)).log()).log()
    y = st.softmax((logits + g) / tau, dim)
    if not hard:
        return y
    index = y.argmax(dim=dim, keepdim=True)
    y_hard = st.zeros_like(y).scatter(dim, index, value=1.0)
    return y_hard - y.detach() + y


from ._functional_ctc import ctc_loss  # noqa: E402

__all__ = [
    "affine_grid",
    "bilinear",
    "cosine_embedding_loss",
    "cosine_similarity",
    "ctc_loss",
    "embedding_bag",
    "gaussian_nll_loss",
    "grid_sample",
    "gumbel_softmax",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "margin_ranking_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "normalize",
    "pairwise_distance",
    "poisson_nll_loss",
    "rms_norm",
    "soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]

# under autocast the losses run in float32 (PyTorch's float32 list): nn's loss layers and
# nn.functional both reach the wrapped functions through this module
from ..amp.autocast_mode import wrap_float32_functions as _wrap_float32  # noqa: E402

_wrap_float32(globals())
