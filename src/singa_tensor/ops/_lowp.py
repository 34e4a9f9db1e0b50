"""Composites on the 16-bit floats: computed in float32 and rounded once.

A primitive op on float16/bfloat16 tensors loads each element into float, computes and rounds
once. A composite built from several primitives would round after each of them; `rounds_once`
makes it compute its whole chain in float32 instead and round the result once, so a
composite on low-precision inputs equals its float32 computation of the same inputs, rounded.
Gradients flow through the casts, so they come back in the inputs' dtype.
"""

from __future__ import annotations

import functools
from typing import Callable

from .. import dtype as _dt
from ..tensor import Tensor

LOW = (_dt.float16, _dt.bfloat16)


def low_dtype_of(*values):
    """The 16-bit float dtype a result of these operands has (the float tensors all share it;
    0-d tensors only count when every tensor is 0-d, PyTorch's promotion rule), else None."""
    tensors = [v for v in values if v.__class__ is Tensor and v.dtype.is_floating_point]
    shaped = [t for t in tensors if t.ndim > 0] or tensors
    kinds = {t.dtype for t in shaped}
    if len(kinds) != 1:
        return None
    d = kinds.pop()
    return d if d in LOW else None


def _up(v):
    if v.__class__ is Tensor and v.dtype in LOW:
        from .layout import cast

        return cast(v, _dt.float32)
    return v


def _down(out, d):
    if out.__class__ is Tensor:
        if out.dtype is _dt.float32:
            from .layout import cast

            return cast(out, d)
        return out
    if isinstance(out, tuple):
        return type(out)(*[_down(o, d) for o in out]) if hasattr(out, "_fields") else tuple(
            _down(o, d) for o in out)
    return out


def rounds_once(fn: Callable) -> Callable:
    """Decorator for a composite: on float16/bfloat16 operands it runs in float32 and its
    float results are rounded back once; other dtypes run it unchanged.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops._lowp import rounds_once
        >>> f = rounds_once(lambda x: x * 3.0 - x)
        >>> f(st.tensor([1.5], dtype=st.bfloat16)).dtype
        singa_tensor.bfloat16
    """

    @functools.wraps(fn)
    def run(*args, **kwargs):
        d = low_dtype_of(*args, *kwargs.values())
        if d is None:
            return fn(*args, **kwargs)
        out = fn(*[_up(a) for a in args], **{k: _up(v) for k, v in kwargs.items()})
        return _down(out, d)

    run.rounds_once = True  # composite() lists the 16-bit floats among the op's dtypes
    return run
