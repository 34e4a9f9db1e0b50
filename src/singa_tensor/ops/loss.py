"""Fused softmax cross entropy over the rows of a (rows, C) matrix of logits with class-index
targets: the per-row loss in one kernel, without storing the log-probabilities, and, when asked,
the rows' sum or mean in the same op (one autograd node for the whole loss). nn's
cross_entropy validates the arguments."""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..creation import arange
from ..tensor import Tensor
from ._registry import OpSpec, apply, contiguous, copy_into, kernel, ptr, register
from .elementwise import _run_unary
from .layout import expand, reshape
from .reduce import _LOW, as_dtype, in_float, run_reduce

_REDUCTIONS = ("none", "sum", "mean")


@register
class SoftmaxCrossEntropy(OpSpec):
    """loss[r] = -(1 - s) w[t] logp[r, t] - s / C * sum_j w[j] logp[r, j], with
    logp = log_softmax(x[r]), t = target[r], s = smoothing, w = weight (None: all 1); rows whose
    target is ignore_index give 0. Targets must already be checked to lie in [0, C)."""

    name = "_softmax_cross_entropy"
    onnx = None

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, smoothing, reduction="none", count=None):
        rows, c = x._shape
        xc, tc = contiguous(x), contiguous(target)
        wc = None if weight is None else contiguous(weight)
        # float16/bfloat16 logits: the rows' loss and lse stay float32 (see the kernel)
        acc = _dt.float32 if x.dtype in _LOW else x.dtype
        loss = Tensor._empty((rows,), acc, x._device, x._be)
        lse = Tensor._empty((rows,), acc, x._device, x._be)
        null = x._be.ffi.NULL
        if rows:
            kernel(x, "softmax_xent")(ptr(xc), ptr(tc), null if wc is None else ptr(wc),
                                      ptr(loss), ptr(lse), rows, c, ignore_index, smoothing)
        ctx.save_for_backward(x)
        ctx.target, ctx.weight, ctx.lse = tc, wc, lse
        ctx.ignore_index, ctx.smoothing = ignore_index, smoothing
        ctx.reduction, ctx.scale = reduction, _mean_scale(rows, count)
        if reduction == "none":
            return loss
        # the rows' sum, then (mean) times 1 / count, as st.mean scales its sum
        total = run_reduce(loss, (0,), False, "sum")
        if reduction == "mean":
            total = _run_unary(total, "affine", ctx.scale, -0.0)  # the product, bit for bit
        return total

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        rows, c = x._shape
        if ctx.reduction != "none" and _ag._mode.enabled:
            g = expand(reshape(g, 1), rows) * ctx.scale
        elif ctx.reduction != "none":  # each row's loss entered the result times scale
            gr = Tensor._empty((rows,), ctx.lse.dtype, x._device, x._be)
            copy_into(as_dtype(g, gr.dtype), gr)
            if ctx.reduction == "mean" and rows:
                kernel(gr, "affine")(ptr(gr), ptr(gr), rows, ctx.scale, -0.0)
            g = gr
        if _ag._mode.enabled:  # create_graph: a composition, differentiable again
            w = None if ctx.weight is None else in_float(ctx.weight)
            dx = _xent_grad_composed(in_float(x), ctx.target, w, ctx.ignore_index,
                                     ctx.smoothing, in_float(g))
            return as_dtype(dx, x.dtype), None, None, None, None, None, None
        dx = Tensor._empty(x._shape, x.dtype, x._device, x._be)
        null = x._be.ffi.NULL
        if rows:
            kernel(x, "softmax_xent_backward")(
                ptr(contiguous(x)), ptr(ctx.target),
                null if ctx.weight is None else ptr(ctx.weight), ptr(ctx.lse),
                ptr(contiguous(as_dtype(g, ctx.lse.dtype))), ptr(dx), rows, c, ctx.ignore_index,
                ctx.smoothing)
        return dx, None, None, None, None, None, None

    @staticmethod
    def reference(x, target, weight, ignore_index, smoothing, reduction="none", count=None):
        m = x.max(axis=1, keepdims=True)
        logp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
        c = x.shape[1]
        w = np.ones(c) if weight is None else weight
        safe = np.where(target == ignore_index, 0, target)
        picked = logp[np.arange(len(x)), safe] * w[safe]
        loss = -(1 - smoothing) * picked - smoothing / c * (logp * w).sum(axis=1)
        loss = np.where(target == ignore_index, 0.0, loss)
        if reduction == "none":
            return loss
        return loss.sum() * (_mean_scale(len(loss), count) if reduction == "mean" else 1.0)

    @staticmethod
    def samples():
        r = np.random.default_rng(32)
        x = r.standard_normal((5, 4))
        t = np.array([0, 3, 1, -100, 2], dtype=np.int64)
        w = r.uniform(0.5, 2.0, 4)
        return [((x, t, None, -100, 0.0), {}), ((x, t, w, -100, 0.2), {}),
                ((x, np.array([1, 1, 0, 2, 3]), w, 1, 0.0), {}),
                ((x, t, None, -100, 0.1, "sum"), {}), ((x, t, w, -100, 0.0, "mean", 4), {}),
                ((x, np.array([1, 3, 0, 2, 3]), None, 3, 0.0, "mean", 3), {}),
                ((x, np.array([1, 3, 0, 2, 3]), None, -100, 0.0, "mean"), {})]


def _mean_scale(rows: int, count) -> float:
    """The factor a mean over `count` rows (None: all of them) scales the rows' sum by; a
    mean over none is NaN (0 * inf), as PyTorch's."""
    n = rows if count is None else count
    return 1.0 / n if n else float("inf")


def _xent_grad_composed(x, target, weight, ignore_index, smoothing, g):
    """d loss / d x of SoftmaxCrossEntropy, written with Tensor ops."""
    rows, c = x.shape
    p = x.softmax(1)
    valid = target != ignore_index
    safe = target * valid.to(target.dtype)  # ignored rows point at class 0, then count 0
    onehot = (safe.unsqueeze(1) == arange(c, device=x.device).reshape(1, c)).to(x.dtype)
    if weight is None:
        wt = valid.to(x.dtype)
        wsum = float(c)
        wrow = None
    else:
        wt = weight.index_select(0, safe) * valid.to(x.dtype)
        wsum = weight.sum()
        wrow = weight.reshape(1, c)
    keep, per = 1.0 - smoothing, smoothing / c
    a = (keep * wt + per * wsum * valid.to(x.dtype)).unsqueeze(1)
    dx = p * a - onehot * (keep * wt).unsqueeze(1)
    if smoothing:
        dx = dx - per * (valid.to(x.dtype).unsqueeze(1) * (1.0 if wrow is None else wrow))
    return dx * g.unsqueeze(1)


def softmax_cross_entropy(x: Tensor, target: Tensor, weight: Tensor | None = None,
                          ignore_index: int = -100, smoothing: float = 0.0,
                          reduction: str = "none", count: int | None = None) -> Tensor:
    """Softmax cross entropy of (rows, C) logits against int64 class indices (rows,), already
    validated (nn.functional.cross_entropy checks them): the per-row losses ("none"), their
    sum, or their sum over `count` ("mean"; None: the number of rows), in one op with one
    backward kernel. float16/bfloat16 logits give float32 results (accumulated in float32, for
    the caller to round once).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.loss import softmax_cross_entropy
        >>> x = st.tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> [round(v, 4) for v in softmax_cross_entropy(x, st.tensor([0, 1])).tolist()]
        [0.6931, 0.6931]
        >>> round(softmax_cross_entropy(x, st.tensor([0, 1]), reduction="mean").item(), 4)
        0.6931
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"softmax_cross_entropy: reduction must be one of "
                         f"{', '.join(map(repr, _REDUCTIONS))}, got {reduction!r}")
    if count is not None and (not isinstance(count, int) or count < 0):
        raise ValueError(f"softmax_cross_entropy: count must be a non-negative int, got "
                         f"{count!r}")
    return apply(SoftmaxCrossEntropy, x, target, weight, int(ignore_index), float(smoothing),
                 reduction, count)


SoftmaxCrossEntropy.fn = staticmethod(softmax_cross_entropy)


# ---- the class-index losses, as ONNX sees them ---------------------------------------------------


@register
class NLLLoss(OpSpec):
    """nn.functional.nll_loss traced as one op, so that ONNX export writes one
    NegativeLogLikelihoodLoss node (opset 12+; below, the ops it runs)."""

    name = "_nll_loss"  # internal: reached through nn.functional.nll_loss
    onnx = "NegativeLogLikelihoodLoss"
    composite = True


@register
class CrossEntropyLoss(OpSpec):
    """nn.functional.cross_entropy traced as one op, so that ONNX export writes one
    SoftmaxCrossEntropyLoss node (opset 12+; label smoothing adds its uniform term from the
    node's log-probabilities)."""

    name = "_cross_entropy"  # internal: reached through nn.functional.cross_entropy
    onnx = "SoftmaxCrossEntropyLoss"
    composite = True


def _class_loss_inputs(b, args):
    """(scores, int64 labels, weight or "", unbatched) value names of a class-index loss: an
    unbatched (C,) input becomes a batch of one."""
    from ..onnx._export import onnx_type
    from .shape import onnx_axes_node

    x, t, w = args["input"], args["target"], args["weight"]
    scores, labels = b.value(x), b.value(t)
    if t.dtype is not _dt.int64:
        (labels,) = b.node("Cast", [labels], to=onnx_type(_dt.int64))
    unbatched = x.ndim == 1
    if unbatched:
        scores = onnx_axes_node(b, "Unsqueeze", scores, [0])
        labels = onnx_axes_node(b, "Unsqueeze", labels, [0])
    weight = "" if w is None else b.value(w)
    if w is not None and w.dtype is not x.dtype:
        (weight,) = b.node("Cast", [weight], to=onnx_type(x.dtype))
    return scores, labels, weight, unbatched


def _class_loss_usable(b, args) -> bool:
    """Whether the ONNX loss node applies: opset 12+, float32/float64 scores, class indices."""
    x, t = args["input"], args["target"]
    return b.opset >= 12 and x.dtype in (_dt.float32, _dt.float64) and \
        not t.dtype.is_floating_point


def _finish(b, y: str, unbatched: bool, reduction: str, outs) -> None:
    from .shape import onnx_axes_node

    if unbatched and reduction == "none":
        onnx_axes_node(b, "Squeeze", y, [0], outs)
    else:
        b.node("Identity", [y], outputs=outs)


def _nll_loss_onnx(cls, b, args, attrs, outs):
    if not _class_loss_usable(b, args):
        return NotImplemented
    scores, labels, weight, unbatched = _class_loss_inputs(b, args)
    reduction = args["reduction"]
    (y,) = b.node("NegativeLogLikelihoodLoss", [scores, labels] + ([weight] if weight else []),
                  reduction=reduction, ignore_index=int(args["ignore_index"]))
    _finish(b, y, unbatched, reduction, outs)
    return None


def _cross_entropy_onnx(cls, b, args, attrs, outs):
    """SoftmaxCrossEntropyLoss. With label smoothing s over C classes a position's loss is
    (1 - s) nll - s / C * sum_c w_c logp_c (0 where ignored): the node gives nll (unreduced)
    and logp, and the mean divides by the summed weights of the counted targets."""
    from ..onnx._export import onnx_type
    from .reduce import onnx_reduce

    if b.opset < 12 and not args["target"].dtype.is_floating_point:
        raise RuntimeError(f"onnx export: cross_entropy with class-index targets needs opset 12 "
                           f"or later (SoftmaxCrossEntropyLoss), got opset {b.opset}")
    if not _class_loss_usable(b, args):
        return NotImplemented
    x, smoothing = args["input"], float(args["label_smoothing"])
    scores, labels, weight, unbatched = _class_loss_inputs(b, args)
    reduction, ignore = args["reduction"], int(args["ignore_index"])
    ins = [scores, labels] + ([weight] if weight else [])
    if smoothing == 0.0:
        (y,) = b.node("SoftmaxCrossEntropyLoss", ins, reduction=reduction, ignore_index=ignore)
        _finish(b, y, unbatched, reduction, outs)
        return None

    def reduce_sum(name: str, dims) -> str:
        out = b.fresh("ReduceSum")
        onnx_reduce(b, "ReduceSum", name, dims, False, [out])
        return out

    nll, logp = b.node("SoftmaxCrossEntropyLoss", ins, 2, reduction="none",
                       ignore_index=ignore)
    n_classes = x.shape[0 if unbatched else 1]
    if weight:
        view = [1, n_classes] + [1] * (x.ndim - (1 if unbatched else 2))
        (logp,) = b.node("Mul", [logp, b.node("Reshape", [weight, b.ints(view)])[0]])
    (counted,) = b.node("Not", [b.node("Equal", [labels, b.ints([ignore])])[0]])
    zero = b.scalar(0.0, x)
    (smooth,) = b.node("Where", [counted, reduce_sum(logp, [1]), zero])
    (kept,) = b.node("Mul", [nll, b.scalar(1.0 - smoothing, x)])
    (spread,) = b.node("Mul", [smooth, b.scalar(-smoothing / n_classes, x)])
    (loss,) = b.node("Add", [kept, spread])
    if reduction == "none":
        _finish(b, loss, unbatched, reduction, outs)
        return None
    dims = list(range(args["target"].ndim + (1 if unbatched else 0)))
    y = reduce_sum(loss, dims)
    if reduction == "mean":
        if weight:
            (safe,) = b.node("Where", [counted, labels, b.ints([0])])
            (per,) = b.node("Where", [counted, b.node("Gather", [weight, safe], axis=0)[0],
                                      zero])
        else:
            (per,) = b.node("Cast", [counted], to=onnx_type(x.dtype))
        (y,) = b.node("Div", [y, reduce_sum(per, dims)])
    b.node("Identity", [y], outputs=outs)
    return None


NLLLoss.onnx_export = classmethod(_nll_loss_onnx)
CrossEntropyLoss.onnx_export = classmethod(_cross_entropy_onnx)
