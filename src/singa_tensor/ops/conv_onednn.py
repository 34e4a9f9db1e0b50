"""2-d convolution through a backend's convolution plan (the CPU backend's oneDNN primitives).

`conv2d` asks the input's backend for a plan of its geometry (`conv2d_plan`; only the CPU with
oneDNN installed and enabled has one: float32, and bfloat16/float16 where oneDNN has native
code for them) and, when it gets one, runs the three ops
here instead of im2col and a matrix product. They form a closed set under differentiation: the
gradients of a convolution are its backward-data and backward-weights, and theirs are
convolutions and backward passes again, so gradients of any order stay on the plan.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import _execution
from .. import dtype as _dt
from ..tensor import Tensor
from ._registry import OpSpec, apply, contiguous, execution, host_decision, ptr, register


def _launch(t: Tensor, fn, symbol: str):
    """fn as a kernel call graph mode can record (it takes buffer pointers only)."""
    ex = _execution.running_count and execution()
    return ex.kernel(fn, symbol, t._be) if ex else fn


_PLANNED = (_dt.float32, _dt.bfloat16, _dt.float16)


def _planner(x: Tensor, name: str):
    """x's backend's plan maker `name`, or None: the backend has none, or an ONNX export is
    tracing (it keeps the paths whose ops all have ONNX forms)."""
    find = getattr(x._be, name, None)
    ex = _execution.running_count and execution()
    return None if find is None or (ex and ex.tracing) else find


def plan_for(x: Tensor, weight: Tensor, bias, geo: tuple, pads: tuple, groups: int):
    """The backend's plan for this convolution, or None (the im2col path runs). Export traces
    keep the im2col path, whose ops all have ONNX forms."""
    if x.dtype not in _PLANNED or weight._be is not x._be or not x.numel():
        return None
    if bias is not None and (bias.dtype is not x.dtype or bias._be is not x._be):
        return None
    find = _planner(x, "conv2d_plan")
    if find is None:
        return None
    n, c, h, w = x._shape
    o = weight._shape[0]
    kh, kw, sh, sw, _, _, dh, dw, oh, ow = geo
    return find(n, c, h, w, o, kh, kw, oh, ow, (sh, sw), pads, (dh, dw), groups,
                bias is not None, x.dtype.name)


# storages of weights that nothing writes in place once made (an imported model's folded
# constants, marked by `keep_weights`): their convolutions keep a copy in the layout the
# convolution computes in, instead of converting them on every call
_KEPT: weakref.WeakSet = weakref.WeakSet()


def keep_weights(weight: Tensor) -> None:
    """Mark weight as never written in place again, so planned convolutions may keep it in
    their own layout (made again only if its storage's version changes anyway).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.conv_onednn import keep_weights
        >>> keep_weights(st.ones(4, 1, 3, 3))
    """
    _KEPT.add(weight._storage)


def _out(like: Tensor, shape: tuple) -> Tensor:
    return Tensor._empty(tuple(shape), like.dtype, like._device, like._be)


def _bias_grad(g: Tensor) -> Tensor:
    return g.sum((0, 2, 3))


@register
class PlannedConv2d(OpSpec):
    """conv2d(x, weight, bias) by a plan; bias may be None (then the plan has none)."""

    name = "_planned_conv2d"
    onnx = None
    dtypes = ("float32",)  # and bfloat16/float16 where the backend plans them

    @staticmethod
    def forward(ctx, x, weight, bias, plan):
        xc, wc = contiguous(x), contiguous(weight)
        bc = contiguous(bias) if bias is not None else None
        out = _out(x, plan.dst_shape)
        # the storage object itself is the key (a replay passes the same one and reads its
        # version then); only weights used as they are stored can be kept
        kept = weight._storage if wc is weight and weight._storage in _KEPT else None
        _launch(x, plan.forward, "onednn_conv2d_forward")(
            ptr(xc), ptr(wc), ptr(bc) if bc is not None else None, ptr(out), kept)
        ctx.plan = plan
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        plan = ctx.plan
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx = gw = gb = None
        if need_x:
            gx = apply(PlannedConv2dBackwardData, g, weight, plan)
        if need_w and need_b:  # one pass gives both
            gw, gb = apply(PlannedConv2dBackwardWeights, x, g, plan)
        elif need_w:
            gw = apply(PlannedConv2dBackwardWeights, x, g, plan.variant(False))
        elif need_b:
            gb = _bias_grad(g)
        return gx, gw, gb, None


@register
class PlannedConv2dBackwardData(OpSpec):
    """The gradient of conv2d with respect to its input: (grad_out, weight) -> grad_x."""

    name = "_planned_conv2d_backward_data"
    onnx = None
    dtypes = ("float32",)  # and bfloat16/float16 where the backend plans them

    @staticmethod
    def forward(ctx, g, weight, plan):
        gc, wc = contiguous(g), contiguous(weight)
        out = _out(g, plan.src_shape)
        _launch(g, plan.backward_data, "onednn_conv2d_backward_data")(ptr(gc), ptr(wc),
                                                                      ptr(out))
        ctx.plan = plan
        ctx.save_for_backward(g, weight)
        return out

    @staticmethod
    def backward(ctx, ggx):
        g, weight = ctx.saved_tensors
        plan = ctx.plan.variant(False)
        need_g, need_w = ctx.needs_input_grad[:2]
        dg = apply(PlannedConv2d, ggx, weight, None, plan) if need_g else None
        dw = apply(PlannedConv2dBackwardWeights, ggx, g, plan) if need_w else None
        return dg, dw, None


@register
class PlannedConv2dBackwardWeights(OpSpec):
    """The gradient of conv2d with respect to its weight: (x, grad_out) -> grad_weight (and,
    for a plan with a bias, the bias gradient as a second output)."""

    name = "_planned_conv2d_backward_weights"
    onnx = None
    dtypes = ("float32",)  # and bfloat16/float16 where the backend plans them

    @staticmethod
    def forward(ctx, x, g, plan):
        xc, gc = contiguous(x), contiguous(g)
        gw = _out(x, plan.weight_shape)
        gb = _out(x, (plan.weight_shape[0],)) if plan.bias else None
        _launch(x, plan.backward_weights, "onednn_conv2d_backward_weights")(
            ptr(xc), ptr(gc), ptr(gw), ptr(gb) if gb is not None else None)
        ctx.plan = plan
        ctx.save_for_backward(x, g)
        return (gw, gb) if gb is not None else gw

    @staticmethod
    def backward(ctx, ggw, ggb=None):
        x, g = ctx.saved_tensors
        plan = ctx.plan.variant(False)
        need_x, need_g = ctx.needs_input_grad[:2]
        dx = apply(PlannedConv2dBackwardData, g, ggw, plan) if need_x else None
        dg = None
        if need_g:
            dg = apply(PlannedConv2d, x, ggw, None, plan)
            if ggb is not None and ctx.plan.bias:
                dg = dg + ggb.reshape(1, -1, 1, 1)
        return dx, dg, None


def conv2d_planned(x: Tensor, weight: Tensor, bias, plan) -> Tensor:
    """conv2d of a 4-d x by plan (from `plan_for`); arguments already validated by conv2d.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.conv_onednn import plan_for, conv2d_planned
        >>> x, w = st.ones(1, 1, 4, 4), st.ones(1, 1, 3, 3)
        >>> plan = plan_for(x, w, None, (3, 3, 1, 1, 1, 1, 1, 1, 4, 4), (1, 1, 1, 1), 1)
        >>> plan is None or conv2d_planned(x, w, None, plan)[0, 0].tolist()[0] == [4, 6, 6, 4]
        True
    """
    return apply(PlannedConv2d, x, weight, bias, plan)


def _all_finite(x: Tensor) -> bool:
    if hasattr(x._be, "view_numpy"):
        return bool(np.isfinite(x._numpy()).all())
    from .elementwise import isfinite

    return bool(isfinite(x).all().item())


def conv_chain(x: Tensor, stages: list) -> Tensor | None:
    """Inference through a chain of 2-d convolutions and max poolings as one backend plan
    (oneDNN's primitives, each reading the previous one's output in its own layout, ReLUs
    fused into the convolutions), or None where no plan applies: a gradient wanted, not
    float32, another backend, an ONNX trace, oneDNN off or without native code for a stage
    (the caller then runs the stages one by one). Arguments are validated by the caller.

    stages: ("conv", weight, bias or None, stride, pads (top, bottom, left, right), dilation,
    groups, relu) and ("pool", (kh, kw), stride, pads, dilation, (out h, out w)).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.conv_onednn import conv_chain
        >>> x, w = st.ones(1, 2, 4, 4), st.ones(3, 2, 3, 3)
        >>> y = conv_chain(x, [("conv", w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
        ...                    ("pool", (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), (2, 2))])
        >>> y is None or y.shape == (1, 3, 2, 2)
        True
    """
    if x.dtype is not _dt.float32 or x.ndim != 4 or not x.numel():
        return None
    find = _planner(x, "conv_chain_plan")
    if find is None:
        return None
    from ..autograd import is_grad_enabled

    grad = is_grad_enabled()
    tensors = [x] + [t for s in stages if s[0] == "conv" for t in s[1:3] if t is not None]
    if any(t.dtype is not _dt.float32 or t._be is not x._be or (grad and t.requires_grad)
           for t in tensors):
        return None
    n, c, h, w = x._shape
    keys, params, kept = [], [], []
    null = x._be.ffi.NULL
    for s in stages:
        if s[0] == "conv":
            _, weight, bias, stride, pads, dil, groups, relu = s
            wc = contiguous(weight)
            keys.append(("conv", weight._shape[0], weight._shape[2], weight._shape[3],
                         tuple(stride), tuple(pads), tuple(dil), groups, bias is not None,
                         bool(relu)))
            params += [ptr(wc), ptr(contiguous(bias)) if bias is not None else null]
            kept.append(weight._storage if wc is weight and weight._storage in _KEPT
                        else None)
        else:
            _, kernel, stride, pads, dil, out = s
            keys.append(("pool", kernel[0], kernel[1], tuple(stride), tuple(pads), tuple(dil),
                         tuple(out)))
    plan = find(n, c, h, w, tuple(keys))
    if plan is None:
        return None
    # oneDNN's max pooling and ReLU let NaN lose to numbers (x86 max), where max_pool2d and
    # relu propagate it: a chain runs on finite input only (under graph capture the answer
    # guards the replay); NaN or inf in x takes the stage-by-stage path
    if not host_decision(lambda: _all_finite(x), bool):
        return None
    out = _out(x, plan.dst_shape)
    _launch(x, plan.run, "onednn_chain")(ptr(contiguous(x)), ptr(out), tuple(kept), *params)
    return out


PlannedConv2d.fn = staticmethod(conv2d_planned)
PlannedConv2dBackwardData.fn = staticmethod(
    lambda g, weight, plan: apply(PlannedConv2dBackwardData, g, weight, plan))
PlannedConv2dBackwardWeights.fn = staticmethod(
    lambda x, g, plan: apply(PlannedConv2dBackwardWeights, x, g, plan))
PlannedConv2dBackwardData.fn.__doc__ = "Internal: conv2d's input gradient by a plan."
PlannedConv2dBackwardWeights.fn.__doc__ = "Internal: conv2d's weight (and bias) gradient by a plan."
