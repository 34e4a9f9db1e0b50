"""Loss functions (PyTorch names and semantics), composed from tensor ops.

Every loss is a composition of registered ops (log_softmax, gather, where, softplus ...; cross
entropy with class indices uses the fused softmax-cross-entropy op), so first and second
derivatives come from autograd. Arguments are validated here, before any
op runs: shapes, dtypes, reductions and class indices out of range raise clear errors naming
the loss.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

import singa_tensor as st
from singa_tensor import _execution
from singa_tensor import ops as _ops
from singa_tensor.autograd import no_grad as _no_grad
from singa_tensor.ops._registry import broadcast_shapes, traced
from singa_tensor.ops.loss import softmax_cross_entropy as _softmax_cross_entropy
from singa_tensor.tensor import Tensor

_REDUCTIONS = ("none", "mean", "sum")
_LOW = (st.float16, st.bfloat16)


def _low_dtype_result(fn):
    """A loss of a float16/bfloat16 input comes back in the input's dtype, as in PyTorch: the
    terms and their reduction compute in float32 where the ops do, and the result is rounded
    once at the end."""

    @functools.wraps(fn)
    def loss(input, *args, **kwargs):
        out = fn(input, *args, **kwargs)
        low = isinstance(input, Tensor) and input.dtype in _LOW
        return out.to(input.dtype) if low and out.dtype is not input.dtype else out

    return loss


# ---- shared checks and reduction ---------------------------------------------------------------


def _check_tensor(op: str, name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")


def _check_float(op: str, name: str, t) -> None:
    _check_tensor(op, name, t)
    if not t.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be a floating point tensor, got {t.dtype.name}")


def _check_reduction(op: str, reduction: str, allowed=_REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(
            f"{op}: reduction must be one of {', '.join(repr(r) for r in allowed)}, "
            f"got {reduction!r}"
        )


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _same_device(op: str, *tensors) -> None:
    devs = {t.device for t in tensors if t is not None}
    if len(devs) > 1:
        raise RuntimeError(
            f"{op}: expected all tensors on the same device, got {sorted(map(str, devs))}"
        )


def _pointwise_pair(op: str, input, target) -> tuple:
    """Validate (input, target) of an elementwise loss and return them in one float dtype.

    A target of another shape broadcasts with a warning, as in PyTorch, since a (N, 1) output
    against a (N,) target silently computes an N x N loss."""
    _check_float(op, "input", input)
    _check_float(op, "target", target)
    _same_device(op, input, target)
    if input.shape != target.shape:
        warnings.warn(
            f"{op}: using a target size {target.shape} that is different to the input size "
            f"{input.shape}; they will be broadcast, which is likely not what you want",
            stacklevel=3,
        )
        broadcast_shapes(input.shape, target.shape, op=op)
    if target.dtype is not input.dtype:
        target = target.to(input.dtype)
    return input, target


# ---- regression losses -------------------------------------------------------------------------


@_low_dtype_result
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error: (input - target)^2, then reduced.

    Example:
        >>> import singa_tensor as st
        >>> mse_loss(st.tensor([1.0, 2.0]), st.tensor([0.0, 4.0])).item()
        2.5
    """
    _check_reduction("mse_loss", reduction)
    input, target = _pointwise_pair("mse_loss", input, target)
    d = input - target
    return _reduce(d * d, reduction)


@_low_dtype_result
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error: |input - target|, then reduced.

    Example:
        >>> import singa_tensor as st
        >>> l1_loss(st.tensor([1.0, 2.0]), st.tensor([0.0, 4.0]), reduction="sum").item()
        3.0
    """
    _check_reduction("l1_loss", reduction)
    input, target = _pointwise_pair("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction)


@_low_dtype_result
def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Huber-like loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input -
    target); beta = 0 is the L1 loss.

    Example:
        >>> import singa_tensor as st
        >>> smooth_l1_loss(st.tensor([0.5, 3.0]), st.zeros(2), reduction="none").tolist()
        [0.125, 2.5]
    """
    _check_reduction("smooth_l1_loss", reduction)
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not beta >= 0:
        raise ValueError(f"smooth_l1_loss: beta must be a non-negative number, got {beta!r}")
    input, target = _pointwise_pair("smooth_l1_loss", input, target)
    z = (input - target).abs()
    if beta == 0:
        return _reduce(z, reduction)
    beta = float(beta)
    loss = st.where(z < beta, z * z * (0.5 / beta), z - 0.5 * beta)
    return _reduce(loss, reduction)


# ---- binary classification ---------------------------------------------------------------------


def _log_clamped(x: Tensor) -> Tensor:
    """max(log(x), -100) for x in [0, 1], with a zero (not NaN) gradient at x == 0.

    Taking log of exactly 0 would put -inf in the graph and 0 * inf = NaN in the backward even
    though the clamp discards that branch, so the log only ever sees positive values."""
    pos = x > 0
    safe = st.where(pos, x, 1.0)
    return st.where(pos, st.clamp(safe.log(), min=-100.0), -100.0)


def _check_weight_broadcasts(op: str, name: str, w, shape) -> Tensor:
    _check_float(op, name, w)
    try:
        out = broadcast_shapes(w.shape, shape, op=op)
    except ValueError:
        out = None
    if out != tuple(shape):
        raise ValueError(
            f"{op}: {name} of shape {w.shape} must broadcast to the input's shape {tuple(shape)}"
        )
    return w


def _binary_target(op: str, input, target, reduction: str, *extra) -> Tensor:
    """The checks both binary cross entropies make; returns target in input's dtype."""
    _check_reduction(op, reduction)
    _check_float(op, "input", input)
    _check_float(op, "target", target)
    if input.shape != target.shape:
        raise ValueError(
            f"{op}: target size {target.shape} must be the same as the input size "
            f"{input.shape}"
        )
    _same_device(op, input, target, *extra)
    return target if target.dtype is input.dtype else target.to(input.dtype)


@_low_dtype_result
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """-w (y log x + (1 - y) log(1 - x)) for probabilities x in [0, 1]; each log is clamped
    to >= -100 (as PyTorch) so the loss stays finite at x = 0 or 1.

    Example:
        >>> import singa_tensor as st
        >>> round(binary_cross_entropy(st.tensor([0.5]), st.tensor([1.0])).item(), 4)
        0.6931
    """
    op = "binary_cross_entropy"
    target = _binary_target(op, input, target, reduction, weight)
    if weight is not None:
        _check_weight_broadcasts(op, "weight", weight, input.shape)
    with _no_grad():
        outside = _ops.logical_not(_ops.logical_and(input >= 0, input <= 1))  # NaN too
        if outside.any().item():
            bad = input[outside].reshape(-1)[0].item()
            raise ValueError(f"{op}: all elements of input should be between 0 and 1, found "
                             f"{bad}")
    loss = -(target * _log_clamped(input) + (1 - target) * _log_clamped(1 - input))
    if weight is not None:
        loss = loss * weight.to(input.dtype)
    return _reduce(loss, reduction)


@_low_dtype_result
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy on logits: sigmoid and log fused in the stable form
    (1 - y) x + (1 + (p - 1) y) softplus(-x), where p is pos_weight (broadcast along the last
    dimension, the classes).

    Example:
        >>> import singa_tensor as st
        >>> round(binary_cross_entropy_with_logits(st.tensor([0.0]), st.tensor([1.0])).item(), 4)
        0.6931
    """
    op = "binary_cross_entropy_with_logits"
    target = _binary_target(op, input, target, reduction, weight, pos_weight)
    sp = st.softplus(-input)  # log(1 + e^-x) without overflow, smooth at 0
    if pos_weight is not None:
        _check_weight_broadcasts(op, "pos_weight", pos_weight, input.shape)
        coeff = 1 + (pos_weight.to(input.dtype) - 1) * target
        loss = (1 - target) * input + coeff * sp
    else:
        loss = (1 - target) * input + sp
    if weight is not None:
        _check_weight_broadcasts(op, "weight", weight, input.shape)
        loss = loss * weight.to(input.dtype)
    return _reduce(loss, reduction)


# ---- multi-class classification ----------------------------------------------------------------


def _class_targets(op: str, input: Tensor, target: Tensor, ignore_index: int) -> tuple:
    """Check class-index targets against an (N, C, d1, ...) or (C,) input. Returns
    (class_dim, n_classes, int64 target, bool mask of ignored positions or None)."""
    _check_float(op, "input", input)
    _check_tensor(op, "target", target)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (classes), got a 0-d "
                         f"tensor")
    if target.dtype.is_floating_point or target.dtype is st.bool:
        raise TypeError(f"{op}: class-index target must be an integer tensor (int64), got "
                        f"{target.dtype.name}")
    if not isinstance(ignore_index, (int, np.integer)) or isinstance(ignore_index, bool):
        raise TypeError(f"{op}: ignore_index must be an int, got {ignore_index!r}")
    _same_device(op, input, target)
    cdim = 0 if input.ndim == 1 else 1
    want = input.shape[:cdim] + input.shape[cdim + 1:]
    if target.shape != want:
        raise ValueError(
            f"{op}: for input of shape {input.shape} (classes along dim {cdim}) the target "
            f"must have shape {want}, got {target.shape}"
        )
    n_classes = input.shape[cdim]
    target = target.to(st.int64)
    ex = _execution.current() if _execution.running_count else None
    tracing = ex is not None and ex.tracing
    if (target._device.type == "cpu" and ex is None) or tracing:
        # eager, on the host: numpy checks the values where it reads them (no tensor ops);
        # an ONNX trace checks its traced targets the same way, outside the graph
        t = target.numpy()
        valid = t != int(ignore_index)
        bad = valid & ((t < 0) | (t >= n_classes))
        if bad.any():
            raise IndexError(
                f"{op}: target {int(t[bad].reshape(-1)[0])} is out of bounds for {n_classes} "
                f"classes (expected values in [0, {n_classes - 1}] or "
                f"ignore_index={ignore_index})"
            )
        if tracing:  # the graph finds the ignored positions of whatever targets it is given
            return cdim, n_classes, target, target == int(ignore_index)
        ignored = None if valid.all() else st.tensor(~valid)
        return cdim, n_classes, target, ignored
    with _no_grad():
        valid = target != int(ignore_index)
        bad = _ops.logical_and(valid, _ops.logical_or(target < 0, target >= n_classes))
        # both answers in one host round trip (each is a device synchronisation off the CPU)
        any_bad, all_valid = st.stack([bad.any(), valid.all()]).tolist()
        if any_bad:
            raise IndexError(
                f"{op}: target {target[bad].reshape(-1)[0].item()} is out of bounds for "
                f"{n_classes} classes (expected values in [0, {n_classes - 1}] or "
                f"ignore_index={ignore_index})"
            )
        ignored = None if all_valid else _ops.logical_not(valid)
    return cdim, n_classes, target, ignored


def _class_weight(op: str, weight, input: Tensor, n_classes: int):
    if weight is None:
        return None
    _check_float(op, "weight", weight)
    _same_device(op, input, weight)
    if weight.shape != (n_classes,):
        raise ValueError(
            f"{op}: weight must be a 1-D tensor with one value per class ({n_classes}), got "
            f"shape {weight.shape}"
        )
    return weight.to(input.dtype)


def _nll(op: str, input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
         checked=None) -> tuple:
    """The negative log-likelihood picked at the targets; returns (reduced loss, per-element
    target weights with ignored positions zeroed, or None when all weights are 1)."""
    cdim, n_classes, target, ignored = checked or _class_targets(op, input, target,
                                                                 ignore_index)
    if input.dtype in _LOW:  # picked and weighted in float32 (exact), rounded once by the caller
        input = input.float()
    weight = _class_weight(op, weight, input, n_classes)
    # ignored positions may hold any value, so pick class 0 there and zero it afterwards
    safe = target if ignored is None else st.where(ignored, 0, target)
    picked = input.gather(cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    if weight is not None:
        w = weight.index_select(0, safe.reshape(-1)).reshape(safe.shape)
        if ignored is not None:
            w = st.where(ignored, 0.0, w)
    elif ignored is not None:
        w = st.logical_not(ignored).to(input.dtype)
    else:
        w = None
    loss = -picked if w is None else -picked * w
    if reduction == "none":
        return loss, w
    if reduction == "sum":
        return loss.sum(), w
    # the weighted mean divides by the total weight of the counted targets, not by N
    return (loss.mean() if w is None else loss.sum() / w.sum()), w


@_low_dtype_result
@traced("_nll_loss")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class-index targets given log-probabilities.

    input is (N, C), (N, C, d1, ...) or (C,); target holds class indices of shape (N,),
    (N, d1, ...) or (). With `weight`, the mean divides by the summed weights of the targets
    that are not `ignore_index`.

    Example:
        >>> import singa_tensor as st
        >>> logp = st.tensor([[-0.5, -1.0], [-2.0, -0.1]])
        >>> round(nll_loss(logp, st.tensor([0, 1])).item(), 4)
        0.3
    """
    _check_reduction("nll_loss", reduction)
    return _nll("nll_loss", input, target, weight, ignore_index, reduction)[0]


@_low_dtype_result
@traced("_cross_entropy")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between logits and targets: log_softmax over the class dim (1, or 0 for
    an unbatched (C,) input), then the negative log-likelihood.

    The target is either class indices (integer tensor without the class dim) or class
    probabilities (float tensor of the input's shape). `label_smoothing` mixes the target with
    the uniform distribution; `ignore_index` applies to class indices only.

    Example:
        >>> import singa_tensor as st
        >>> logits = st.tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> round(cross_entropy(logits, st.tensor([0, 1])).item(), 4)
        0.6931
    """
    op = "cross_entropy"
    _check_reduction(op, reduction)
    if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    _check_float(op, "input", input)
    _check_tensor(op, "target", target)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension (classes), got a 0-d "
                         f"tensor")
    cdim = 0 if input.ndim == 1 else 1
    if target.dtype.is_floating_point:
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing, cdim)
    checked = _class_targets(op, input, target, ignore_index)
    if input.dtype in (st.float32, st.float64) + _LOW:
        return _fused_cross_entropy(input, weight, ignore_index, reduction, label_smoothing,
                                    checked)
    logp = st.log_softmax(input, cdim)
    nll, w = _nll(op, logp, target, weight, ignore_index, reduction, checked)
    if label_smoothing == 0:
        return nll
    _, n_classes, target, ignored = checked
    weight = _class_weight(op, weight, input, n_classes)
    if weight is not None:
        view = [1] * input.ndim
        view[cdim] = n_classes
        smooth = -(logp * weight.reshape(view)).sum(cdim)
    else:
        smooth = -logp.sum(cdim)
    if ignored is not None:
        smooth = st.where(ignored, 0.0, smooth)
    if reduction == "sum":
        smooth = smooth.sum()
    elif reduction == "mean":
        smooth = smooth.mean() if w is None else smooth.sum() / w.sum()
    eps = float(label_smoothing)
    return nll * (1.0 - eps) + smooth * (eps / n_classes)


def _fused_cross_entropy(input, weight, ignore_index, reduction, label_smoothing, checked):
    """cross_entropy with class indices through the fused per-row kernel: the class dim is
    moved last and the positions flattened into rows."""
    op = "cross_entropy"
    cdim, n_classes, target, ignored = checked
    weight = _class_weight(op, weight, input, n_classes)
    if input.ndim > 2:
        rows = input.movedim(cdim, -1).reshape(-1, n_classes)
    else:
        rows = input if input.ndim == 2 else input.reshape(1, n_classes)
    flat = target if target.ndim == 1 else target.reshape(-1)
    if reduction == "none":
        loss = _softmax_cross_entropy(rows, flat, weight, int(ignore_index),
                                      float(label_smoothing))
        return loss.reshape(target.shape)
    if reduction == "sum" or weight is not None:
        total = _softmax_cross_entropy(rows, flat, weight, int(ignore_index),
                                       float(label_smoothing), "sum")
        if reduction == "sum":
            return total
    else:  # the mean over the counted targets: the sum and its scale in the same op
        count = None if ignored is None else int(flat.numel() - ignored.sum().item())
        return _softmax_cross_entropy(rows, flat, None, int(ignore_index),
                                      float(label_smoothing), "mean", count)
    # a weighted mean divides by the total weight of the counted targets
    with _no_grad():
        safe = target if ignored is None else st.where(ignored, 0, target)
        wd = weight.detach()
        w = (wd.float() if wd.dtype in _LOW else wd).index_select(0, safe.reshape(-1))
        if ignored is not None:
            w = st.where(ignored.reshape(-1), 0.0, w)
        denom = w.sum()
    return total / denom


def _cross_entropy_probs(input, target, weight, reduction, label_smoothing, cdim) -> Tensor:
    op = "cross_entropy"
    if target.shape != input.shape:
        raise ValueError(
            f"{op}: a class-probability target must have the input's shape {input.shape}, got "
            f"{target.shape} (class-index targets must be an integer tensor)"
        )
    _same_device(op, input, target)
    n_classes = input.shape[cdim]
    weight = _class_weight(op, weight, input, n_classes)
    target = target.to(input.dtype)
    if label_smoothing > 0:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    terms = st.log_softmax(input, cdim) * target
    if weight is not None:
        view = [1] * input.ndim
        view[cdim] = n_classes
        terms = terms * weight.reshape(view)
    loss = -terms.sum(cdim)
    # the mean divides by the number of positions, even with class weights (as PyTorch)
    return _reduce(loss, reduction)


# ---- distributions -----------------------------------------------------------------------------


@_low_dtype_result
def kl_div(input: Tensor, target: Tensor, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence target * (log target - input), with input given as
    log-probabilities (and target too when log_target=True).

    reduction='batchmean' divides the sum by the batch size (input.shape[0]) and gives the
    true KL divergence; 'mean' averages over every element, as PyTorch does.

    Example:
        >>> import singa_tensor as st
        >>> p = st.tensor([[0.5, 0.5]])
        >>> kl_div(p.log(), p, reduction="batchmean").item()
        0.0
    """
    op = "kl_div"
    _check_reduction(op, reduction, _REDUCTIONS + ("batchmean",))
    input, target = _pointwise_pair(op, input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # 0 * log 0 is 0 (the limit); log only sees nonzero values so no NaN enters the
        # backward, while a negative target still gives NaN, as log of it would.
        zero = target == 0
        tlogt = st.where(zero, 0.0, target * st.where(zero, 1.0, target).log())
        loss = tlogt - target * input
    if reduction == "batchmean":
        if not input.ndim or not loss.numel():
            total = loss.sum()
            return total / float(input.shape[0]) if input.ndim else total
        # the mean of the per-sample sums: an exported graph reads the batch size it runs at
        return loss.reshape(input.shape[0], -1).sum(1).mean()
    return _reduce(loss, reduction)


__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "kl_div",
    "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss",
]

# under autocast the losses run in float32 (PyTorch's float32 list): nn's loss layers and
# nn.functional both reach the wrapped functions through this module
from ..amp.autocast_mode import wrap_float32_functions as _wrap_float32  # noqa: E402

_wrap_float32(globals())

# the registry's specs of the two traced losses name their public functions, as every spec does
_ops.loss.NLLLoss.fn = staticmethod(nll_loss)
_ops.loss.CrossEntropyLoss.fn = staticmethod(cross_entropy)
