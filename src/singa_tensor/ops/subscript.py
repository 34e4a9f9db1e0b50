"""Subscripts: `x[key]` and `x[key] = value` with numpy's (and PyTorch's) rules.

A key is split into its basic part (ints, slices, None, Ellipsis), which becomes one strided
view, and its advanced part (integer and boolean index arrays), which becomes one
index_select (reading) or one scatter (writing) over the merged indexed dimensions.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor, contiguous_strides
from . import _registry
from ._registry import (
    OpSpec,
    apply,
    broadcast_shapes,
    broadcast_strides,
    contiguous,
    copy_into,
    expect_tensor,
    kernel,
    ptr,
    register,
    tensor_method,
    traced,
)
from .index import (
    AsStrided,
    IndexSelect,
    _check_bounds,
    _flat_nonzero,
    _fresh_copy,
    _prod,
    _to_storage,
)
from .inplace import check_inplace, write_result
from .layout import cast, permute, reshape, sum_to
from .shape import onnx_axes_node

# ---- x[key]: parsing ------------------------------------------------------------------------


class _Key:
    """A parsed index: the basic part as one strided view (vshape, vstrides, offset in the
    input's row-major layout) and the advanced part as groups (view dims, int64 index into
    those dims flattened, their element count), broadcast together to bshape."""

    __slots__ = ("vshape", "vstrides", "offset", "groups", "bshape", "first", "rshape")


def _classify(op: str, k, x: Tensor):
    """(kind, value, number of x dims consumed) for one element of an index."""
    if k is None:
        return "new", None, 0
    if k is Ellipsis:
        return "ell", None, 0
    if isinstance(k, (bool, np.bool_)):
        return "bool", bool(k), 0
    if isinstance(k, (int, np.integer)):
        return "int", int(k), 1
    if isinstance(k, slice):
        return "slice", k, 1
    if k.__class__ is not Tensor:
        if not isinstance(k, (list, tuple, np.ndarray)):
            raise IndexError(
                f"{op}: only integers, slices (`:`), ellipsis (`...`), None and integer or "
                f"bool tensors are valid indices (got {type(k).__name__})")
        try:
            a = np.asarray(k)
        except ValueError as e:
            raise IndexError(f"{op}: could not use {k!r} as an index ({e})") from None
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)
        if a.dtype.kind not in "biu":
            raise IndexError(f"{op}: arrays used as indices must be of integer or bool type, "
                             f"got {a.dtype}")
        k = creation.tensor(a, dtype=_dt.bool_ if a.dtype.kind == "b" else _dt.int64,
                            device=x.device)
    if k._device != x._device:
        k = k.to(x.device)
    if k.dtype is _dt.bool_:
        return ("bool", bool(k.item()), 0) if k.ndim == 0 else ("mask", k, k.ndim)
    if k.dtype.is_floating_point:
        raise IndexError(f"{op}: tensors used as indices must be integer or bool tensors, "
                         f"got {k.dtype.name}")
    return "adv", (k if k.dtype is _dt.int64 else cast(k, _dt.int64)), 1


def _slice_range(op: str, s: slice, n: int):
    step = 1 if s.step is None else operator.index(s.step)
    if step <= 0:
        raise ValueError(f"{op}: slice step must be greater than zero, got {step} (use "
                         "st.flip for reversed order)")
    start, stop, _ = slice(s.start, s.stop, 1).indices(n)
    return start, len(range(start, stop, step)), step


def _parse(x: Tensor, key, op: str) -> _Key:
    items = key if isinstance(key, tuple) else (key,)
    entries = [_classify(op, k, x) for k in items]
    if sum(e[0] == "ell" for e in entries) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    shape = x._shape
    used = sum(e[2] for e in entries)
    if used > len(shape):
        raise IndexError(f"{op}: too many indices for tensor of dimension {len(shape)} "
                         f"(got {used})")
    if not any(e[0] == "ell" for e in entries):
        entries.append(("ell", None, 0))
    cs = contiguous_strides(shape)
    vshape, vstrides, groups = [], [], []
    offset = d = 0

    def keep(dim):
        vshape.append(shape[dim])
        vstrides.append(cs[dim])

    for kind, val, n_used in entries:
        if kind == "ell":
            for _ in range(len(shape) - used):
                keep(d)
                d += 1
            used = len(shape)
        elif kind == "new" or kind == "bool":
            if kind == "bool":  # numpy: a scalar mask indexes a new size-1 dim
                idx = creation.zeros(1 if val else 0, dtype=_dt.int64, device=x.device)
                groups.append(((len(vshape),), idx, 1))
            vshape.append(1)
            vstrides.append(0)
        elif kind == "int":
            n = shape[d]
            if not -n <= val < n:
                raise IndexError(f"{op}: index {val} is out of range for dimension {d} with "
                                 f"size {n}")
            offset += (val % n) * cs[d]
            d += 1
        elif kind == "slice":
            start, size, step = _slice_range(op, val, shape[d])
            offset += start * cs[d] if size else 0
            vshape.append(size)
            vstrides.append(step * cs[d])
            d += 1
        elif kind == "mask":
            if val._shape != shape[d:d + n_used]:
                raise IndexError(
                    f"{op}: the shape of the mask {val._shape} does not match the shape "
                    f"{shape[d:d + n_used]} of the indexed tensor at dims {d}..{d + n_used - 1}")
            groups.append((tuple(range(len(vshape), len(vshape) + n_used)), _mask_positions(val),
                           _prod(val._shape)))
            for j in range(n_used):
                keep(d + j)
            d += n_used
        else:
            groups.append(((len(vshape),), _check_bounds(op, val, d, shape[d], wrap=True),
                           shape[d]))
            keep(d)
            d += 1
    p = _Key()
    p.vshape, p.vstrides, p.offset, p.groups = tuple(vshape), tuple(vstrides), offset, groups
    p.bshape, p.first, p.rshape = (), False, p.vshape
    if groups:
        try:
            p.bshape = broadcast_shapes(*(g[1]._shape for g in groups), op=op)
        except ValueError:
            raise IndexError(f"{op}: shape mismatch: indexing tensors could not be broadcast "
                             f"together with shapes {[g[1]._shape for g in groups]}") from None
        vd = [v for g in groups for v in g[0]]
        p.first = vd[-1] - vd[0] + 1 != len(vd)
        rest = tuple(n for i, n in enumerate(vshape) if i not in vd)
        p.rshape = (p.bshape + rest if p.first else
                    p.vshape[:vd[0]] + p.bshape + p.vshape[vd[-1] + 1:])
    return p


# ---- x[key]: reading ------------------------------------------------------------------------


def _linear(groups, strides) -> Tensor:
    """sum over groups of index * stride, broadcast across groups (int64)."""
    lin = None
    for _, idx, st in zip(groups, (g[1] for g in groups), strides):
        term = idx if st == 1 else idx * st
        lin = term if lin is None else lin + term
    return lin


def _take(x: Tensor, p: _Key) -> Tensor:
    basic = (p.vshape, p.vstrides, p.offset)
    if not (p.groups and basic == (x._shape, contiguous_strides(x._shape), 0)):
        x = apply(AsStrided, x, *basic)
    if not p.groups:
        return x
    vd = [v for g in p.groups for v in g[0]]
    if p.first:
        x = permute(x, *(vd + [i for i in range(x.ndim) if i not in vd]))
        p0 = 0
    else:
        p0 = vd[0]
    sizes = [g[2] for g in p.groups]
    strides = [_prod(sizes[i + 1:]) for i in range(len(sizes))]
    pre, post = x._shape[:p0], x._shape[p0 + len(vd):]
    merged = reshape(x, *(pre + (_prod(sizes),) + post))
    flat = contiguous(reshape(_linear(p.groups, strides), -1))
    return reshape(apply(IndexSelect, merged, p0, flat), *(pre + p.bshape + post))


@tensor_method("__getitem__")
@traced("getitem")
def getitem(x: Tensor, key) -> Tensor:
    """x[key] with numpy's rules: ints, slices and None give a view; integer and bool tensors
    (or lists, arrays) index with broadcasting and copy. An int next to index tensors counts
    as basic indexing (PyTorch's rule), so x[0, :, [1, 2]] has shape (5, 2) for (4, 5, 6).

    Example:
        >>> import singa_tensor as st
        >>> x = st.arange(12).reshape(3, 4)
        >>> x[1:, ::2].tolist(), x[[0, 2], [1, 3]].tolist(), x[x > 9].tolist()
        ([[4, 6], [8, 10]], [1, 11], [10, 11])
    """
    return _take(x, _parse(x, key, "__getitem__"))


# ---- x[key] = value ----------------------------------------------------------------------------


def _positions(p: _Key, device) -> Tensor:
    """Row-major positions (in the input) of every element of x[key], shape p.rshape."""
    R = len(p.rshape)
    vd = [v for g in p.groups for v in g[0]]
    start = 0 if p.first else (vd[0] if vd else R)
    pos = creation.scalar_tensor(p.offset, _dt.int64, device)
    r = len(p.bshape) if p.first else 0
    for i, (n, st) in enumerate(zip(p.vshape, p.vstrides)):
        if i in vd:
            if i == vd[0] and not p.first:
                r += len(p.bshape)
            continue
        if n > 1 and st:
            term = creation.arange(n, dtype=_dt.int64, device=pos.device) * st
            pos = pos + reshape(term, *((1,) * r + (n,) + (1,) * (R - r - 1)))
        r += 1
    if p.groups:
        lin = _linear(p.groups, [p.vstrides[g[0][-1]] for g in p.groups])
        nb = len(p.bshape)
        pos = pos + reshape(lin, *((1,) * start + p.bshape + (1,) * (R - start - nb)))
    return contiguous(pos._view(p.rshape, broadcast_strides(pos, p.rshape), pos._offset))


def _mask_positions(mask: Tensor) -> Tensor:
    """Row-major positions of a mask's true elements. While onnx export traces, they come from
    the traced nonzero op, so the exported graph computes them from its own mask instead of
    keeping the traced ones as a constant."""
    ex = _registry.execution()
    if ex is None or not ex.tracing:
        return _flat_nonzero(mask)
    from .index import nonzero

    return reshape(nonzero(reshape(mask, (-1,))), (-1,))


def _put(out: Tensor, p: _Key, value: Tensor, accumulate: bool) -> None:
    """Write value (broadcast to x[key]'s shape) into the contiguous out at key."""
    pos = _positions(p, out.device)
    n = pos.numel()
    if not n:
        return
    vb = contiguous(value._view(p.rshape, broadcast_strides(value, p.rshape), value._offset))
    op = "scatter_add" if accumulate else "scatter"
    kernel(out, op)(ptr(vb), ptr(pos), ptr(out), 1, out.numel(), n, 1)
    out._storage.version += 1


@register
class IndexPut(OpSpec):
    name = "index_put"
    onnx = "ScatterND"

    @staticmethod
    def forward(ctx, x, value, key, accumulate):
        ctx.key, ctx.accumulate, ctx.value_shape = key, accumulate, value._shape
        out = _fresh_copy(x)
        _put(out, key, value, accumulate)
        return out

    @staticmethod
    def backward(ctx, g):
        gx = gv = None
        if ctx.needs_input_grad[0]:
            gx = g if ctx.accumulate else apply(
                IndexPut, g, creation.zeros((), dtype=g.dtype, device=g.device), ctx.key, False)
        if ctx.needs_input_grad[1]:
            gv = sum_to(_take(g, ctx.key), ctx.value_shape)
        return gx, gv, None, None

    @staticmethod
    def reference(x, indices, values, accumulate=False):
        out = x.copy()
        if accumulate:
            np.add.at(out, indices, values)
        else:
            out[indices] = values
        return out

    @staticmethod
    def samples():
        r = np.random.default_rng(20)
        x = r.standard_normal((4, 5, 6))
        return [
            ((x, (slice(1, 3), Ellipsis, 2), r.standard_normal((5,))), {}),
            ((x, (np.array([3, 0]), slice(None), np.array([1, 5])), r.standard_normal((2, 5))),
             {}),
            ((x, (np.array([[0], [2]]), 1, np.array([4, 0, 1])), r.standard_normal((3,))), {}),
            ((x, x[..., 0] > 0.5, r.standard_normal((6,))), {}),
            ((x, (np.array([1, 1, 2]),), r.standard_normal((3, 5, 6))), {"accumulate": True}),
        ]


def _value_arg(op: str, x: Tensor, value, rshape) -> Tensor:
    if value.__class__ is not Tensor:
        if isinstance(value, (int, float, bool, np.number, np.bool_)):
            value = creation.scalar_tensor(value.item() if isinstance(value, np.generic)
                                           else value, x.dtype, x.device)
        else:
            value = creation.tensor(value, dtype=x.dtype, device=x.device)
    else:
        if value._device != x._device:
            value = value.to(x.device)
        if value.dtype is not x.dtype:
            value = cast(value, x.dtype)
    while value.ndim > len(rshape) and value._shape[0] == 1:  # numpy drops leading 1s
        value = reshape(value, *value._shape[1:])
    try:
        ok = broadcast_shapes(value._shape, rshape) == rshape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{op}: shape mismatch: value of shape {value._shape} cannot be "
                         f"broadcast to indexing result of shape {rshape}")
    return value


@tensor_method()
def index_put(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """Out of place x[indices] = values (or += with accumulate, where repeated indices add up);
    indices is anything x[...] accepts.

    Example:
        >>> import singa_tensor as st
        >>> st.index_put(st.zeros(3), (st.tensor([0, 0]),), st.tensor(1.0), True).tolist()
        [2.0, 0.0, 0.0]
    """
    expect_tensor("index_put", x)
    p = _parse(x, indices, "index_put")
    return apply(IndexPut, x, _value_arg("index_put", x, values, p.rshape), p, bool(accumulate))


IndexPut.fn = staticmethod(index_put)


def _assign(x: Tensor, key, value, accumulate: bool, op: str) -> Tensor:
    from .. import autograd as _ag

    check_inplace(x, op)
    p = _parse(x, key, op)
    value = _value_arg(op, x, value, p.rshape)
    if _ag._mode.enabled and (x.requires_grad or value.requires_grad):
        return write_result(x, apply(IndexPut, x, value, p, accumulate), op)
    if value._storage is x._storage:  # overlapping source and destination
        value = _fresh_copy(value)
    if not p.groups and not accumulate:
        view = x._view(*_to_storage(x, p.vshape, p.vstrides, p.offset))
        copy_into(value, view)
        return x
    target = x if x._contig else _fresh_copy(x)
    _put(target, p, value, accumulate)
    if target is not x:
        copy_into(target, x)
    return x


@tensor_method("__setitem__")
def setitem(x: Tensor, key, value) -> None:
    """x[key] = value: value (a number or anything broadcastable to x[key]) is cast to x's
    dtype and written in place; with gradients on, the write is recorded in the graph.

    Example:
        >>> import singa_tensor as st
        >>> x = st.zeros(2, 3)
        >>> x[0, 1:] = 5.0; x[[1, 1], [0, 2]] = st.tensor([7.0, 8.0]); x.tolist()
        [[0.0, 5.0, 5.0], [7.0, 0.0, 8.0]]
    """
    _assign(x, key, value, False, "__setitem__")


@tensor_method()
def index_put_(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """In-place index_put.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(3).index_put_((st.tensor([2]),), st.tensor(4.0)).tolist()
        [0.0, 0.0, 4.0]
    """
    return _assign(x, indices, values, bool(accumulate), "index_put_")


@register
class Getitem(OpSpec):
    name = "getitem"
    onnx = None
    composite = True

    @staticmethod
    def reference(x, key):
        return np.asarray(x[key]).copy()

    @staticmethod
    def samples():
        x = np.random.default_rng(21).standard_normal((4, 5, 6))
        return [((x, k), {}) for k in (
            (1, slice(None, None, 2)), (Ellipsis, None, slice(1, 4)), (np.array([3, 1, 3]),),
            (slice(None), np.array([[0], [4]]), np.array([1, 2, 5])),
            (np.array([0, 2]), slice(1, 3), np.array([5, 1])), x[:, :, 0] > 0)]



def _getitem_onnx(cls, b, args, attrs, outs):
    """Basic keys (ints, slices, None, ...) as Slice, Gather and Unsqueeze; advanced ones are
    written as the ops they run."""
    x, key = args["x"], args["key"]
    key = key if isinstance(key, tuple) else (key,)
    simple = (int, np.integer, slice, type(None), type(Ellipsis))
    if any(isinstance(k, (bool, np.bool_)) or not isinstance(k, simple) for k in key):
        return NotImplemented
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > x.ndim or sum(k is Ellipsis for k in key) > 1:
        return NotImplemented
    full = []
    for k in key:
        full.extend([slice(None)] * (x.ndim - used) if k is Ellipsis else [k])
    if Ellipsis not in key:
        full += [slice(None)] * (x.ndim - used)
    name, dim, out_dim, drops, news = b.value(x), 0, 0, [], []
    for k in full:
        if k is None:
            news.append(out_dim)
            out_dim += 1
            continue
        n = x.shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if (start, stop, step) != (0, n, 1):
                if step < 0:
                    return NotImplemented
                end = 2**63 - 1 if stop >= n else stop
                (name,) = b.node("Slice", [name, b.ints([start]), b.ints([end]), b.ints([dim]),
                                           b.ints([step])])
            out_dim += 1
        else:
            drops.append((dim, int(k) % n if n else int(k)))
        dim += 1
    for d, i in reversed(drops):
        (name,) = b.node("Gather", [name, b.const(np.asarray(i, dtype=np.int64))], axis=d)
    if news:
        if b.opset >= 13:
            (name,) = b.node("Unsqueeze", [name, b.ints(news)])
        else:
            (name,) = b.node("Unsqueeze", [name], axes=news)
    b.node("Identity", [name], outputs=outs)


Getitem.onnx_export = classmethod(_getitem_onnx)


def _index_put_onnx(cls, b, args, attrs, outs):
    """ScatterND into the flattened input at the row-major positions _positions computes:
    the basic part of the key is a constant, the index tensors are graph values."""
    x, value, p, accumulate = args
    if accumulate and b.opset < 16:
        return NotImplemented  # ScatterND adds repeated positions from opset 16 only
    if not _prod(p.rshape) or not x.numel():
        b.node("Identity", [b.value(x)], outputs=outs)
        return
    R = len(p.rshape)
    vd = [v for g in p.groups for v in g[0]]
    start = 0 if p.first else (vd[0] if vd else R)
    static = np.full((1,) * R, p.offset, dtype=np.int64)
    r = len(p.bshape) if p.first else 0
    for i, (n, st) in enumerate(zip(p.vshape, p.vstrides)):
        if i in vd:
            if i == vd[0] and not p.first:
                r += len(p.bshape)
            continue
        if n > 1 and st:
            static = static + (np.arange(n, dtype=np.int64) * st).reshape(
                (1,) * r + (n,) + (1,) * (R - r - 1))
        r += 1
    pos = b.const(static)
    if p.groups:
        lin = None
        for g in p.groups:
            term = b.value(g[1])
            stride = p.vstrides[g[0][-1]]
            if stride != 1:
                (term,) = b.node("Mul", [term, b.const(np.asarray(stride, dtype=np.int64))])
            lin = term if lin is None else b.node("Add", [lin, term])[0]
        nb = len(p.bshape)
        (lin,) = b.node("Reshape", [lin, b.ints((1,) * start + p.bshape +
                                                (1,) * (R - start - nb))])
        (pos,) = b.node("Add", [pos, lin])
    (pos,) = b.node("Expand", [pos, b.ints(p.rshape)])
    (pos,) = b.node("Reshape", [pos, b.ints([-1, 1])])
    (upd,) = b.node("Expand", [b.value(value), b.ints(p.rshape)])
    (upd,) = b.node("Reshape", [upd, b.ints([-1])])
    (flat,) = b.node("Reshape", [b.value(x), b.ints([-1])])
    (out,) = b.node("ScatterND", [flat, pos, upd], reduction="add" if accumulate else None)
    (shape,) = b.node("Shape", [b.value(x)])
    b.node("Reshape", [out, shape], outputs=outs)


IndexPut.onnx_export = classmethod(_index_put_onnx)


def _as_strided_onnx(cls, b, args, attrs, outs):
    """A basic-index view as Slice per dim of x, then Squeeze (dims read at one index),
    Transpose, Unsqueeze and Expand (new or stride-0 dims): nothing bakes in a dim's size."""
    x, shape, strides, offset = args
    if _prod(shape) == 0 or x.ndim == 0:
        return NotImplemented
    cs = contiguous_strides(x._shape)
    start = [(offset // c) % n if n > 1 else 0 for n, c in zip(x._shape, cs)]
    stepped = {}  # dim of x -> (dim of the view, step)
    for j, (n, st) in enumerate(zip(shape, strides)):
        if st == 0:
            continue
        for d, (m, c) in enumerate(zip(x._shape, cs)):
            if m > 1 and c <= st < c * m and st % c == 0 and d not in stepped:
                stepped[d] = (j, st // c)
                break
        else:
            if n > 1:
                return NotImplemented
    name = b.value(x)
    starts, ends, axes, steps = [], [], [], []
    for d, n in enumerate(x._shape):
        j, step = stepped.get(d, (None, 1))
        size = shape[j] if j is not None else 1
        end = start[d] + (size - 1) * step + 1
        if start[d] == 0 and end >= n and step == 1:
            continue
        starts.append(start[d])
        # a range to the end stays one when a dynamic dim grows; a single index does not
        ends.append(2**63 - 1 if end >= n and j is not None else end)
        axes.append(d)
        steps.append(step)
    if axes:
        (name,) = b.node("Slice", [name, b.ints(starts), b.ints(ends), b.ints(axes),
                                   b.ints(steps)])
    drop = [d for d in range(x.ndim) if d not in stepped]
    if drop:
        name = onnx_axes_node(b, "Squeeze", name, drop)
    kept = sorted(stepped)  # x's order; the view wants its own
    order = sorted(range(len(kept)), key=lambda i: stepped[kept[i]][0])
    if order != list(range(len(kept))):
        (name,) = b.node("Transpose", [name], perm=order)
    taken = {j for j, _ in stepped.values()}
    new = [j for j in range(len(shape)) if j not in taken]
    if new:
        name = onnx_axes_node(b, "Unsqueeze", name, new)
    if any(n > 1 and st == 0 for n, st in zip(shape, strides)):
        target = [n if n > 1 and st == 0 else 1 for n, st in zip(shape, strides)]
        (name,) = b.node("Expand", [name, b.ints(target)])
    b.node("Identity", [name], outputs=outs)


AsStrided.onnx_export = classmethod(_as_strided_onnx)

Getitem.fn = staticmethod(getitem)



__all__ = ["index_put", "index_put_"]
