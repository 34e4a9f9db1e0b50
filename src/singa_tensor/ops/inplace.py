"""In-place ops (add_, mul_, zero_, fill_, copy_, clamp_ ...).

An in-place op computes its result with the out-of-place op (which records the graph when
gradients are wanted), writes it into the tensor's storage, bumps the storage's version
counter, and makes the tensor the output of the new graph node. The version counter is how a
backward detects that a tensor it saved has since been overwritten.
"""

from __future__ import annotations

import numpy as np

from .. import autograd as _ag
from .. import dtype as _dt
from ..autograd import AccumulateGrad
from ..tensor import Tensor
from ._registry import copy_into, kernel, ptr, tensor_method
from .layout import cast, expand

VIEW_OPS = {"view", "expand", "permute", "slice", "select", "squeeze", "unsqueeze", "diagonal",
            "as_strided"}


def _views_a_leaf(x: Tensor) -> bool:
    node = x._node
    while node is not None and getattr(node, "name", None) in VIEW_OPS:
        e = node.next[0] if node.next else None
        if e is None:
            return False
        if isinstance(e[0], AccumulateGrad):
            leaf = e[0].leaf
            return leaf is not None and leaf.requires_grad
        node = e[0]
    return False


# ---- memory overlap ------------------------------------------------------------------------------


def has_internal_overlap(t: Tensor) -> bool:
    """Whether two elements of t share one memory location (an expanded or as_strided view).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.inplace import has_internal_overlap
        >>> has_internal_overlap(st.zeros(4).expand(3, 4)), has_internal_overlap(st.zeros(8)[::2])
        (True, False)
    """
    if t._contig:
        return False
    dims = sorted((abs(s), n) for n, s in zip(t._shape, t._strides) if n > 1)
    if not dims:
        return False
    if dims[0][0] == 0:
        return True
    span = 1  # one past the largest offset the smaller dimensions reach
    for s, n in dims:
        if s < span:
            break
        span += s * (n - 1)
    else:
        return False
    # strides that interleave: enumerate the offsets (only as_strided makes such views)
    offs = np.zeros(1, dtype=np.int64)
    for s, n in dims:
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    return np.unique(offs).size != offs.size


def _byte_extent(t: Tensor) -> tuple:
    lo = hi = t._offset
    for n, s in zip(t._shape, t._strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    item = t.dtype.itemsize
    return lo * item, (hi + 1) * item


def partly_overlaps(out: Tensor, t) -> bool:
    """Whether t reads memory that writing out changes, other than as the very same view
    (which elementwise kernels handle: each element is read before it is written).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops.inplace import partly_overlaps
        >>> x = st.arange(10.0)
        >>> partly_overlaps(x[1:], x[:-1]), partly_overlaps(x[:5], x[5:]), partly_overlaps(x, x)
        (True, False, False)
    """
    if t.__class__ is not Tensor or t._storage is not out._storage or not t.numel() \
            or not out.numel():
        return False
    if (t._offset, t._shape, t._strides, t.dtype) == (out._offset, out._shape, out._strides,
                                                      out.dtype):
        return False
    a, b = _byte_extent(out), _byte_extent(t)
    return a[0] < b[1] and b[0] < a[1]


def apart_from(out: Tensor, value):
    """value, or a copy of it where it partly overlaps out, so that writing out cannot change
    what is read from value (the computation goes through the copy as through a temporary).
    Lists and tuples of tensors are handled element by element."""
    if value.__class__ is Tensor:
        if not partly_overlaps(out, value):
            return value
        if _ag._mode.enabled and value.requires_grad:
            from .layout import clone

            return clone(value)
        fresh = Tensor._empty(value._shape, value.dtype, value._device, value._be)
        copy_into(value, fresh)
        return fresh
    if value.__class__ in (list, tuple):
        return value.__class__(apart_from(out, v) for v in value)
    return value


def check_writable(x: Tensor, op: str) -> None:
    """Refuse to write into x when several of its elements share one memory location (an
    expanded view): which write would win is undefined."""
    if has_internal_overlap(x):
        raise RuntimeError(
            f"{op}: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location. Please clone() the tensor before performing "
            "the operation."
        )


def check_inplace(x: Tensor, op: str, writes: bool = True) -> None:
    """The checks every in-place op makes before it changes x: x is a Tensor, x's elements
    are distinct memory (unless the op only changes x's shape: writes=False), and autograd
    allows the change."""
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if writes:
        check_writable(x, op)
    if _ag._mode.enabled and x.requires_grad:
        if x._node is None:
            raise RuntimeError(
                f"{op}: a leaf tensor that requires grad is being used in an in-place "
                "operation; wrap it in `with st.no_grad():` (e.g. for a parameter update) or "
                "operate on a clone"
            )
        if _views_a_leaf(x):
            raise RuntimeError(
                f"{op}: a view of a leaf tensor that requires grad is being used in an in-place "
                "operation"
            )


def write_result(x: Tensor, result: Tensor, op: str) -> Tensor:
    """Store result (broadcastable to x) into x; x takes over result's place in the graph."""
    result = apart_from(x, result)  # an op may hand back a view of x's own memory
    if result._shape != x._shape:
        try:
            from ._registry import broadcast_shapes

            ok = broadcast_shapes(result._shape, x._shape, op=op) == x._shape
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{op}: output with shape {x._shape} doesn't match the broadcast shape "
                f"{result._shape}"
            )
        result = expand(result, *x._shape)
    if result.dtype is not x.dtype:
        if x.dtype.is_floating_point or not result.dtype.is_floating_point:
            result = cast(result, x.dtype)
        else:
            raise TypeError(
                f"{op}: result type {result.dtype.name} can't be cast to the desired output type "
                f"{x.dtype.name}"
            )
    tracked = result.requires_grad and _ag._mode.enabled
    base = x._base
    if tracked and base is not None and base._storage is x._storage:
        new_base = _base_after_write(base, x, result, op)
        copy_into(result, x)
        base._node, base._out, base.requires_grad = new_base._node, new_base._out, True
    else:
        copy_into(result, x)
    if tracked:
        x._node = result._node
        x._out = result._out
        x.requires_grad = True
    return x


def _base_after_write(base: Tensor, view: Tensor, result: Tensor, op: str) -> Tensor:
    """The graph value of base once result is written through view (PyTorch's CopySlices):
    result where the view lies, base's old value elsewhere. Built with `where`, which saves
    only its mask, so overwriting base's storage afterwards breaks nothing saved."""
    from .. import creation
    from .elementwise import where
    from .index import as_strided_backward

    if base._node is None and base.requires_grad:
        raise RuntimeError(
            f"{op}: a view of a leaf tensor that requires grad is being used in an in-place "
            "operation"
        )
    if not base._contig:
        raise RuntimeError(
            f"{op}: in-place modification of a view of a non-contiguous tensor that requires "
            "grad is not supported; compute the new value out of place instead"
        )
    if any(n > 1 and s == 0 for n, s in zip(view._shape, view._strides)):
        raise RuntimeError(
            f"{op}: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location; clone() it first"
        )
    layout = (view._shape, view._strides, view._offset - base._offset)
    try:
        placed = as_strided_backward(result, base._shape, *layout)
    except ValueError:
        raise RuntimeError(
            f"{op}: in-place modification of this kind of view of a tensor that requires grad "
            "is not supported; compute the new value out of place instead"
        ) from None
    with _ag.no_grad():
        ones = creation.ones(view._shape, dtype=_dt.bool_, device=view.device)
        mask = as_strided_backward(ones, base._shape, *layout)
    return where(mask, placed, base)


def _tracked_input(x: Tensor) -> Tensor:
    """The value of x that a recorded op may save: a copy, because x is about to be
    overwritten and a saved x would then fail the version check in backward."""
    from .layout import clone

    return clone(x)


def inplace_binary(x: Tensor, other, fn, op: str) -> Tensor:
    check_inplace(x, op)
    other = apart_from(x, other)
    if (not _ag._mode.enabled or not (x.requires_grad or getattr(other, "requires_grad", False))):
        # fast path: the kernel writes straight into x when the layout allows
        if (x._contig and other.__class__ is Tensor and other.dtype is x.dtype
                and other._shape == x._shape and other._contig and x.dtype in _KERNEL_DTYPES
                and op[:-1] in _DIRECT_BINARY):
            from ._registry import int64s

            n = x.numel()
            one = int64s(x, (1,))
            kernel(x, op[:-1])(ptr(x), ptr(other), ptr(x), 1, int64s(x, (n,)), one, one)
            x._storage.version += 1
            return x
        if (x._contig and op in _AFFINE_SCALAR and other.__class__ in (int, float)
                and x.dtype in _KERNEL_DTYPES):
            # x * s or x + s with a Python number: the affine kernel a * x + b in place, with
            # the number as the out-of-place op takes it (a 16-bit x's sum rounds it to x's
            # dtype, its product keeps it in float32, as PyTorch does). b = -0.0 or a = 1 keeps
            # the result bit for bit that of the plain product or sum (-0.0 is the additive
            # identity that also keeps a product's negative zero)
            v = (float(other) if x.dtype.itemsize > 2 or op == "mul_"
                 else _rounded(float(other), x.dtype))
            a, b = (v, -0.0) if op == "mul_" else (1.0, v if op == "add_" else -v)
            kernel(x, "affine")(ptr(x), ptr(x), x.numel(), a, b)
            x._storage.version += 1
            return x
        with _ag.no_grad():
            r = fn(x, other)
        return write_result(x, r, op)
    xs = _tracked_input(x)
    return write_result(x, fn(xs, xs if other is x else other), op)


_DIRECT_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum"}
_AFFINE_SCALAR = ("mul_", "add_", "sub_")
# the float dtypes with kernels of their own (float16/bfloat16 compute in float, round once)
_KERNEL_DTYPES = (_dt.float32, _dt.float64, _dt.float16, _dt.bfloat16)


def _rounded(v: float, d) -> float:
    """v rounded to the 16-bit float dtype d (through float32, as a scalar tensor of d is
    made), as a Python float."""
    if d is _dt.float16:
        return float(np.float16(np.float32(v)))
    bits = int(np.float32(v).view(np.uint32))
    if v != v:
        return v
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # nearest, ties to even
    return float(np.uint32(bits).view(np.float32))


def inplace_unary(x: Tensor, fn, op: str, *args, **kwargs) -> Tensor:
    check_inplace(x, op)
    args, kwargs = apart_from(x, args), {k: apart_from(x, v) for k, v in kwargs.items()}
    if not _ag._mode.enabled or not x.requires_grad:
        direct = getattr(fn, "in_place", None)  # an elementwise kernel can write into x
        if direct is not None and direct(x, args, kwargs):
            return x
        with _ag.no_grad():
            r = fn(x, *args, **kwargs)
        return write_result(x, r, op)
    return write_result(x, fn(_tracked_input(x), *args, **kwargs), op)


def inplace_method(fn, name: str, kind: str):
    """The Tensor method `name` (e.g. "add_") that computes with the out-of-place op fn and
    writes the result into self; kind is how (ops/_registry.py `bind_method`)."""
    if kind == "inplace_binary":
        def method(self, other, *, alpha=None):
            if alpha is not None:
                other = other * alpha
            return inplace_binary(self, other, fn, name)
    elif kind == "inplace_unary":
        def method(self, *args, **kwargs):
            return inplace_unary(self, fn, name, *args, **kwargs)
    else:
        def method(self, *args, **kwargs):
            check_inplace(self, name)
            args, kwargs = apart_from(self, args), {k: apart_from(self, v)
                                                     for k, v in kwargs.items()}
            return write_result(self, fn(self, *args, **kwargs), name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place {fn.__name__}: the result is written into this tensor."
    return method


@tensor_method()
def fill_(x: Tensor, value) -> Tensor:
    """Set every element to value, in place.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2).fill_(3).tolist()
        [3.0, 3.0]
    """
    check_inplace(x, "fill_")
    from .. import creation

    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError("fill_: only supports a 0-dimensional value tensor")
        value = value.item()
    if x.numel():
        if _ag._mode.enabled and x.requires_grad:
            # the new value does not depend on the old one: the graph restarts here
            copy_into(creation.scalar_tensor(value, x.dtype, x.device), x)
            x._node = None
            x.requires_grad = False
        else:
            copy_into(creation.scalar_tensor(value, x.dtype, x.device), x)
    return x


@tensor_method()
def zero_(x: Tensor) -> Tensor:
    """Set every element to zero, in place.

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2).zero_().tolist()
        [0.0, 0.0]
    """
    check_inplace(x, "zero_")
    return fill_(x, 0)


@tensor_method()
def copy_(x: Tensor, src) -> Tensor:
    """Copy src (broadcast, cast and moved as needed) into x, in place.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2, 2).copy_(st.tensor([1.0, 2.0])).tolist()
        [[1.0, 2.0], [1.0, 2.0]]
    """
    check_inplace(x, "copy_")
    if src.__class__ is not Tensor:
        from .. import creation

        src = creation.tensor(src, dtype=x.dtype, device=x.device)
    if src.device != x.device:
        src = src.to(x.device)
    if src.dtype is not x.dtype:
        src = cast(src, x.dtype)
    if _ag._mode.enabled and src.requires_grad:
        from .layout import clone

        return write_result(x, clone(expand(src, *x._shape) if src._shape != x._shape else src),
                            "copy_")
    from ._registry import broadcast_shapes

    if broadcast_shapes(src._shape, x._shape, op="copy_") != x._shape:
        raise ValueError(f"copy_: source of shape {src._shape} does not broadcast to {x._shape}")
    copy_into(apart_from(x, src), x)
    if x._node is not None and _ag._mode.enabled:
        x._node = None
        x.requires_grad = False
    return x
