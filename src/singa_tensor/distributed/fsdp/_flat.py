"""The flat parameter of one FSDP unit: its layout, its all-gathers and the autograd Functions
that join the gathered parameters to the graph.

A unit's parameters are flattened, in order, into one buffer padded to a multiple of the
number of ranks; rank r keeps elements [r * S, (r + 1) * S) of it as the unit's parameter.
Each forward call gathers the whole buffer into a fresh tensor (a `Gathered`), and the
module's parameter attributes become views of it, produced by `Unshard` so that backward sends
their gradients to `Unshard.backward`, which reduce-scatters them into the shard's gradient.

Freeing the gathered buffer between forward and backward keeps the tensors that ops saved for
backward (views of it) but releases their memory: the storage object they share gives its
buffer back and is refilled before the unit's backward (`move_storage`).
"""

from __future__ import annotations

from ... import creation
from ...autograd import Function, no_grad
from ...ops.shape import cat
from ...tensor import Tensor


def move_storage(dst, src) -> None:
    """Make storage object dst hold src's buffer (dst's own is released), keeping dst's
    identity and version, so every tensor viewing dst (saved for backward too) sees the new
    buffer and autograd's check of the saved version still holds."""
    for cls in type(dst).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in ("version", "__weakref__", "__dict__"):
                setattr(dst, name, getattr(src, name))


class ParamInfo:
    """Where one original parameter lives: the modules and attribute names that show it (more
    than one when it is shared), its shape and its span in the flat buffer."""

    __slots__ = ("owners", "shape", "numel", "offset")

    def __init__(self, owners: list, shape: tuple, numel: int, offset: int):
        self.owners, self.shape, self.numel, self.offset = owners, shape, numel, offset


class Gathered:
    """The full flat buffer of one forward call of a unit. `full` is a tensor whose storage the
    parameter views share; `filled` says whether that storage holds the values now; `pending`
    is an all-gather started ahead of time (buffer, Work)."""

    __slots__ = ("unit", "full", "filled", "pending", "post_index")

    def __init__(self, unit):
        self.unit = unit
        self.full: Tensor | None = None
        self.filled = False
        self.pending = None
        self.post_index = -1


def views(infos: list, full: Tensor) -> tuple:
    """The original parameters as views of the full flat buffer."""
    return tuple(full.narrow(0, i.offset, i.numel).view(i.shape) for i in infos)


def flat_grad(infos: list, grads, padded: int, like: Tensor) -> Tensor:
    """The gradients of the views as one flat buffer of `padded` elements (zeros in the
    padding and for views that got no gradient)."""
    parts = [g.detach().reshape(-1) if g is not None else
             creation.zeros(i.numel, dtype=like.dtype, device=like.device)
             for i, g in zip(infos, grads)]
    used = sum(i.numel for i in infos)
    if padded > used:
        parts.append(creation.zeros(padded - used, dtype=like.dtype, device=like.device))
    return cat(parts) if len(parts) > 1 else parts[0].clone()


class Unshard(Function):
    """flat shard -> the unit's parameters (views of the gathered buffer); backward turns their
    gradients into the shard's (the unit reduce-scatters them)."""

    @staticmethod
    def forward(ctx, flat, unit, handle):
        ctx.unit, ctx.handle = unit, handle
        return views(unit._infos, handle.full)

    @staticmethod
    def backward(ctx, *grads):
        with no_grad():
            return ctx.unit._post_backward(ctx.handle, grads), None, None


class PreBackward(Function):
    """Identity on a unit's outputs whose backward runs before any of the unit's own: it makes
    sure the unit's parameters are gathered again (and starts the next unit's gather)."""

    @staticmethod
    def forward(ctx, unit, handle, *tensors):
        ctx.unit, ctx.handle = unit, handle
        return tensors if len(tensors) > 1 else tensors[0]

    @staticmethod
    def backward(ctx, *grads):
        with no_grad():
            ctx.unit._pre_backward(ctx.handle)
        return (None, None) + grads
