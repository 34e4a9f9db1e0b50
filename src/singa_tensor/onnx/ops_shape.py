"""ONNX import handlers for shape and index ops: Shape, Reshape, Slice, Gather, Scatter*, Pad...

Exported graphs do their shape arithmetic with these ops (Shape -> Gather -> Concat ->
Reshape), so the int64 "metadata" inputs (a target shape, Slice starts, pads, repeats) are read
to Python with `ints` and the data itself moves through our ops, keeping gradients. Index
tensors (Gather*, Scatter*) are turned into flat positions with numpy: they are integers and
carry no gradient, while the values they pick or write stay tensors.
"""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st

from ..ops._registry import host_decision
from ..ops.index import _min_max
from ..ops.more_index import _distinct
from ._graph import st_dtype
from ._handlers import handler

_INT = (st.int64, st.int32)
# integer tensors up to this size are shape metadata: numpy handles them faster than a kernel
_SMALL = 256


def _ints(t) -> list | None:
    """An integer tensor's values as a Python list (the shape, starts, pads... inputs)."""
    if t is None:
        return None
    a = t._numpy().reshape(-1)
    return a.tolist() if a.dtype.kind in "iub" else [int(v) for v in a]


def _small_ints(*ts) -> bool:
    return all(t.dtype in _INT for t in ts) and sum(t.numel() for t in ts) <= _SMALL


def _axis(node, axis: int, ndim: int, what: str = "axis") -> int:
    a = int(axis)
    if not -ndim <= a < ndim:
        raise node.fail(f"{what} {a} is out of range for a tensor of rank {ndim}")
    return a + ndim if a < 0 else a


def _axes(node, axes, ndim: int) -> list:
    out = [_axis(node, a, ndim, "axes entry") for a in axes]
    if len(set(out)) != len(out):
        raise node.fail(f"axes {list(axes)} repeat an axis")
    return out


def _need(node, inputs, n: int) -> None:
    if len(inputs) < n or any(v is None for v in inputs[:n]):
        raise node.fail(f"expected at least {n} inputs, got {len(inputs)}")


def _attr_or_input(node, attrs, name: str, inputs, i: int, moved_at: int):
    """An int list that was attribute `name` before opset moved_at and is input i after."""
    if node.opset < moved_at:
        v = attrs.get(name)
        return None if v is None else [int(a) for a in v]
    return _ints(inputs[i]) if len(inputs) > i and inputs[i] is not None else None


def _index_array(node, t, n: int | None = None) -> np.ndarray:
    """An index tensor as int64 numpy, negatives wrapped and bounds checked against n."""
    a = np.asarray(t._numpy())
    if a.dtype.kind not in "iu":
        raise node.fail(f"indices must be integers, got {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if n is not None and a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < -n or hi >= n:
            raise node.fail(f"index {lo if lo < -n else hi} is out of bounds for an axis of "
                            f"size {n}")
        if lo < 0:
            a = np.where(a < 0, a + n, a)
    return a


def _device_index(node, t, n: int):
    """An index tensor as flat int64 on its device, negatives wrapped, bounds checked against
    n (reading only the minimum and maximum, as a host decision)."""
    if t.dtype not in (st.int32, st.int64):
        raise node.fail(f"indices must be integers, got {t.dtype.name}")
    flat = t.reshape(-1)
    if flat.dtype is not st.int64:
        flat = flat.to(st.int64)
    if flat.numel() == 0:
        return flat
    lo, hi = host_decision(lambda: _min_max(flat), lambda v: (v[0] < -n or v[1] >= n, v[0] < 0))
    if lo < -n or hi >= n:
        raise node.fail(f"index {lo if lo < -n else hi} is out of bounds for an axis of size {n}")
    return st.where(flat < 0, flat + n, flat) if lo < 0 else flat


_HALF = (st.float16, st.bfloat16)


def _in_float(fn, x, *args):
    """fn(x, *args) computed in float32 for half types, which the index kernels lack (the
    casts are exact both ways and differentiable)."""
    if x.dtype in _HALF:
        return fn(x.to(st.float32), *args).to(x.dtype)
    return fn(x, *args)


def _item(t):
    """The first element of a tensor as a Python number (numpy has no bfloat16)."""
    return (t.float() if t.dtype in _HALF else t).reshape(-1).tolist()[0]


def _strides(shape) -> list:
    out, s = [], 1
    for n in reversed(shape):
        out.append(s)
        s *= n
    return out[::-1]


# ---- shape metadata -----------------------------------------------------------------------------


@handler("Shape")
def shape_(node, inputs, attrs):
    _need(node, inputs, 1)
    shp = inputs[0].shape
    return node.const(list(shp[attrs.get("start", 0):attrs.get("end", len(shp))]),
                      dtype=st.int64)


@handler("Size")
def size_(node, inputs, attrs):
    _need(node, inputs, 1)
    return node.const(inputs[0].numel(), dtype=st.int64)


@handler("Reshape")
def reshape_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if node.opset < 5:
        shape = [int(s) for s in attrs.get("shape", [])]
    else:
        _need(node, inputs, 2)
        shape = _ints(inputs[1])
    allowzero = attrs.get("allowzero", 0)
    if allowzero and 0 in shape and -1 in shape:
        raise node.fail(f"shape {shape} has both 0 and -1 with allowzero=1")
    if not allowzero:
        if len(shape) > x.ndim and 0 in shape[x.ndim:]:
            raise node.fail(f"shape {shape}: a 0 at position >= rank {x.ndim} copies no dim")
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise node.fail(f"invalid target shape {shape}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or x.numel() % known:
            raise node.fail(f"cannot infer -1 in shape {shape} for {x.numel()} elements")
        shape[shape.index(-1)] = x.numel() // known
    elif known != x.numel():
        raise node.fail(f"cannot reshape {tuple(x.shape)} to {shape}")
    return x if tuple(shape) == tuple(x.shape) else st.reshape(x, *shape)


@handler("Flatten")
def flatten_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    axis = int(attrs.get("axis", 1))
    if not -x.ndim <= axis <= x.ndim:
        raise node.fail(f"axis {axis} is out of range for a tensor of rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    return st.reshape(x, math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@handler("Squeeze")
def squeeze_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    axes = _attr_or_input(node, attrs, "axes", inputs, 1, 13)
    if axes is None:
        axes = [i for i, n in enumerate(x.shape) if n == 1]
    axes = _axes(node, axes, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            raise node.fail(f"cannot squeeze axis {a} of size {x.shape[a]} (shape "
                            f"{tuple(x.shape)})")
    return st.reshape(x, *[n for i, n in enumerate(x.shape) if i not in axes])


@handler("Unsqueeze")
def unsqueeze_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    axes = _attr_or_input(node, attrs, "axes", inputs, 1, 13)
    if axes is None:
        raise node.fail("axes are required")
    rank = x.ndim + len(axes)
    axes = set(_axes(node, axes, rank))
    rest = iter(x.shape)
    return st.reshape(x, *[1 if i in axes else next(rest) for i in range(rank)])


@handler("Transpose")
def transpose_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    perm = attrs.get("perm")
    perm = list(range(x.ndim))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(_axes(node, perm, x.ndim)) != list(range(x.ndim)):
        raise node.fail(f"perm {perm} is not a permutation of {x.ndim} axes")
    return x.permute(*perm) if x.ndim else x


@handler("Concat")
def concat(node, inputs, attrs):
    xs = [v for v in inputs if v is not None]
    if not xs:
        raise node.fail("needs at least one input")
    if "axis" not in attrs and node.opset >= 4:
        raise node.fail("attribute axis is required")
    rank = xs[0].ndim
    axis = _axis(node, attrs.get("axis", 1), rank)
    for v in xs:
        if v.ndim != rank or any(a != b for i, (a, b) in enumerate(zip(v.shape, xs[0].shape))
                                 if i != axis):
            raise node.fail(f"cannot concatenate shapes {[tuple(t.shape) for t in xs]} on "
                            f"axis {axis}")
    xs = [v for v in xs if v.shape[axis] != 0] or xs[:1]
    if len(xs) == 1:
        return xs[0]
    dt = xs[0].dtype
    if any(v.dtype is not dt for v in xs):
        raise node.fail(f"inputs have different dtypes {[v.dtype.name for v in xs]}")
    if _small_ints(*xs):
        # shape arithmetic (building a target shape): no gradient, numpy joins them
        return node.const(np.concatenate([v._numpy() for v in xs], axis), dtype=dt)
    return st.cat(xs, axis)


@handler("Split")
def split_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    axis = _axis(node, attrs.get("axis", 0), x.ndim)
    n = x.shape[axis]
    sizes = _attr_or_input(node, attrs, "split", inputs, 1, 13)
    if sizes is None:
        parts = attrs.get("num_outputs", node.n_out) if node.opset >= 18 else node.n_out
        if node.opset >= 18 and "num_outputs" not in attrs:
            raise node.fail("needs the split input or the num_outputs attribute")
        if parts < 1 or (node.opset < 18 and n % parts):
            raise node.fail(f"cannot split an axis of size {n} into {parts} equal parts")
        size = -(-n // parts)
        sizes = [min(size, n - i * size) for i in range(parts)]
        if any(s < 0 for s in sizes):
            raise node.fail(f"cannot split an axis of size {n} into {parts} parts")
    if len(sizes) != node.n_out or any(s < 0 for s in sizes) or sum(sizes) != n:
        raise node.fail(f"split sizes {sizes} must be {node.n_out} non-negative sizes summing "
                        f"to {n}")
    return tuple(st.split(x, sizes, axis))


# ---- slicing and broadcasting -------------------------------------------------------------------


def _slice_bounds(n: int, start: int, end: int, step: int) -> tuple:
    """ONNX's clamping of (start, end) on a dim of size n for the sign of step."""
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    if step > 0:
        return min(max(start, 0), n), min(max(end, 0), n)
    return min(max(start, 0), n - 1), min(max(end, -1), n - 1)


@handler("Slice")
def slice_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if node.opset < 10:
        starts, ends = attrs.get("starts"), attrs.get("ends")
        axes, steps = attrs.get("axes"), None
    else:
        _need(node, inputs, 3)
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
        steps = _ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else None
    if starts is None or ends is None:
        raise node.fail("starts and ends are required")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have "
                        "the same length")
    y = x
    for a, s, e, k in zip(_axes(node, axes, x.ndim), starts, ends, steps):
        if k == 0:
            raise node.fail(f"step of axis {a} is 0")
        n = y.shape[a]
        s, e = _slice_bounds(n, int(s), int(e), int(k))
        if k > 0:
            if (s, e, k) != (0, n, 1):
                y = st.slice_view(y, a, s, max(s, e), k)
        else:
            # a negative step walks the flipped axis forwards
            y = st.flip(y, a)
            s, e = n - 1 - s, n - 1 - e
            y = st.slice_view(y, a, s, max(s, e), -k)
    return y


def _broadcast(node, a, b) -> tuple:
    try:
        return tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise node.fail(f"shapes {tuple(a)} and {tuple(b)} do not broadcast") from None


@handler("Expand")
def expand_(node, inputs, attrs):
    _need(node, inputs, 2)
    x = inputs[0]
    shape = _broadcast(node, x.shape, _ints(inputs[1]))
    return x if shape == tuple(x.shape) else st.expand(x, *shape)


@handler("Tile")
def tile_(node, inputs, attrs):
    _need(node, inputs, 2)
    x, reps = inputs[0], _ints(inputs[1])
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise node.fail(f"repeats {reps} must be {x.ndim} non-negative counts")
    return x if all(r == 1 for r in reps) else st.tile(x, reps)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "wrap": "circular"}


@handler("Pad")
def pad_(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise node.fail(f"mode {mode!r} is not one of {sorted(_PAD_MODES)}")
    value = 0.0
    if node.opset < 11:
        pads = [int(p) for p in attrs.get("pads", attrs.get("paddings", []))]
        value = float(attrs.get("value", 0.0))
        axes = list(range(x.ndim))
    else:
        _need(node, inputs, 2)
        pads = _ints(inputs[1])
        if len(inputs) > 2 and inputs[2] is not None:
            value = _item(inputs[2]) if inputs[2].numel() else 0.0
        axes = (_axes(node, _ints(inputs[3]), x.ndim) if len(inputs) > 3 and inputs[3] is not None
                else list(range(x.ndim)))
    if len(pads) != 2 * len(axes):
        raise node.fail(f"pads {pads} must hold a begin and an end for each of {len(axes)} axes")
    pairs = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        pairs[a] = (pads[i], pads[i + len(axes)])
    if not any(v for lo_hi in pairs for v in lo_hi):
        return x
    if mode != "constant":
        # negative pads crop first (ONNX allows them in every mode); then only growth is left
        for a, (lo, hi) in enumerate(pairs):
            if lo < 0 or hi < 0:
                n = x.shape[a]
                if -min(lo, 0) - min(hi, 0) > n:
                    raise node.fail(f"pads {pads} crop more than axis {a} of size {n}")
                x = st.slice_view(x, a, -min(lo, 0), n + min(hi, 0))
        pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    for a, ((lo, hi), n) in enumerate(zip(pairs, x.shape)):
        if mode != "constant" and (lo or hi) and n == 0:
            raise node.fail(f"mode {mode!r} cannot pad the empty axis {a}")
        if mode == "reflect" and (lo >= n or hi >= n) and (lo or hi):
            raise node.fail(f"reflect pads ({lo}, {hi}) need axis {a} longer than {max(lo, hi)}"
                            f", got size {n}")
    if mode == "wrap" and any(lo > n or hi > n for (lo, hi), n in zip(pairs, x.shape)):
        # wrapping more than once around: pick the positions modulo the axis size
        for a, ((lo, hi), n) in enumerate(zip(pairs, x.shape)):
            if lo or hi:
                src = np.arange(-lo, n + hi, dtype=np.int64) % n
                x = _in_float(st.index_select, x, a, node.const(src))
        return x
    flat = [v for lo_hi in reversed(pairs) for v in lo_hi]
    try:
        if mode == "constant":
            return st.pad(x, flat, "constant", value)
        return st.pad(x, flat, _PAD_MODES[mode])
    except ValueError as e:
        raise node.fail(str(e)) from None


@handler("CenterCropPad")
def center_crop_pad(node, inputs, attrs):
    _need(node, inputs, 2)
    x, shape = inputs[0], _ints(inputs[1])
    axes = attrs.get("axes")
    axes = list(range(x.ndim)) if axes is None else _axes(node, axes, x.ndim)
    if len(shape) != len(axes):
        raise node.fail(f"shape {shape} must have one size per axis {axes}")
    y = x
    for a, s in zip(axes, shape):
        n = y.shape[a]
        if s < 0:
            raise node.fail(f"negative target size {s}")
        if s < n:
            lo = (n - s) // 2
            y = st.slice_view(y, a, lo, lo + s)
        elif s > n:
            lo = (s - n) // 2
            pad = [0, 0] * (y.ndim - a - 1) + [lo, s - n - lo]
            y = st.pad(y, pad, "constant", 0)
    return y


# ---- gather / scatter ---------------------------------------------------------------------------


@handler("Gather")
def gather_(node, inputs, attrs):
    _need(node, inputs, 2)
    x, idx = inputs
    if x.ndim == 0:
        raise node.fail("data must have rank >= 1")
    axis = _axis(node, attrs.get("axis", 0), x.ndim)
    n = x.shape[axis]
    if _small_ints(x):
        # shape arithmetic (Shape -> Gather): integers without gradient, picked by numpy
        return node.const(np.take(x._numpy(), _index_array(node, idx, n), axis=axis),
                          dtype=x.dtype)
    if idx.ndim == 0:
        # a single position is a view, no kernel (Shape -> Gather(i)): a view, no kernel
        (i,) = _ints(idx)
        if not -n <= i < n:
            raise node.fail(f"index {i} is out of bounds for axis {axis} of size {n}")
        return st.select(x, axis, i + n if i < 0 else i)
    memo = node.memo
    if memo is not None and memo[0] is idx and memo[1] == (idx._storage.version, n):
        flat_idx, ishape = memo[2], memo[3]  # the same index tensor (a constant) as last run
    else:
        # checked and wrapped on the device: for indices computed by the graph (token ids
        # into an embedding) graph mode then guards on the bounds decision, not the values
        flat_idx, ishape = _device_index(node, idx, n), idx.shape
        node.memo = (idx, (idx._storage.version, n), flat_idx, ishape)
    flat = _in_float(st.index_select, x, axis, flat_idx)
    return st.reshape(flat, *x.shape[:axis], *ishape, *x.shape[axis + 1:])


@handler("GatherElements")
def gather_elements(node, inputs, attrs):
    _need(node, inputs, 2)
    x, idx = inputs
    axis = _axis(node, attrs.get("axis", 0), x.ndim)
    if idx.ndim != x.ndim:
        raise node.fail(f"indices {tuple(idx.shape)} must have the rank of data "
                        f"{tuple(x.shape)}")
    a = _index_array(node, idx, x.shape[axis])
    try:
        return _in_float(st.gather, x, axis, node.const(a))
    except (ValueError, IndexError) as e:
        raise node.fail(str(e)) from None


def _nd_positions(node, data_shape, a: np.ndarray, batch_dims: int) -> tuple:
    """Flat row positions of GatherND/ScatterND index tuples (last axis of a) and the size of
    the slice each one addresses."""
    k = a.shape[-1] if a.ndim else 0
    b = batch_dims
    if a.ndim < 1 or k > len(data_shape) - b or a.ndim <= b:
        raise node.fail(f"indices {a.shape} do not fit data {tuple(data_shape)} with "
                        f"batch_dims {b}")
    if tuple(a.shape[:b]) != tuple(data_shape[:b]):
        raise node.fail(f"batch dims of indices {a.shape} and data {tuple(data_shape)} differ")
    dims = np.array(data_shape[b:b + k], dtype=np.int64)
    if a.size and ((a < -dims).any() or (a >= dims).any()):
        raise node.fail(f"indices out of range for data {tuple(data_shape)}")
    a = np.where(a < 0, a + dims, a)
    inner = math.prod(data_shape[b + k:])
    pos = (a * np.array(_strides(data_shape[b:b + k]), dtype=np.int64)).sum(-1)
    nb = math.prod(data_shape[:b])
    per_batch = math.prod(data_shape[b:b + k])
    batch = np.arange(nb, dtype=np.int64).reshape(a.shape[:b] + (1,) * (a.ndim - 1 - b))
    return pos + batch * per_batch, inner


@handler("GatherND")
def gather_nd(node, inputs, attrs):
    _need(node, inputs, 2)
    x, idx = inputs
    b = int(attrs.get("batch_dims", 0))
    a = _index_array(node, idx)
    pos, inner = _nd_positions(node, x.shape, a, b)
    k = a.shape[-1]
    rows = st.reshape(x, -1, inner) if x.numel() else st.reshape(x, math.prod(x.shape[:b + k]),
                                                                 inner)
    out = _in_float(st.index_select, rows, 0, node.const(pos.reshape(-1)))
    return st.reshape(out, *a.shape[:-1], *x.shape[b + k:])


_REDUCE = {"add": st.add, "mul": st.mul, "max": st.maximum, "min": st.minimum}


def _scatter_flat(node, x, pos: np.ndarray, upd, reduction: str):
    """x with the (flattened) updates written at flat positions pos, combined by reduction.

    Repeated positions are applied in rounds (the k-th occurrence of each position in round
    k), so each round is one index_put without collisions and the result follows ONNX's
    sequential order, with gradients to both x and the updates."""
    if reduction not in ("none", *_REDUCE):
        raise node.fail(f"reduction {reduction!r} is not supported")
    if upd.dtype is not x.dtype:
        raise node.fail(f"updates dtype {upd.dtype.name} differs from data {x.dtype.name}")
    pos = pos.reshape(-1)
    if pos.size != upd.numel():
        raise node.fail(f"{upd.numel()} updates for {pos.size} index positions")
    flat, vals = st.reshape(x, -1), st.reshape(upd, -1)
    if pos.size == 0:
        return x
    if x.dtype in _HALF:
        return _scatter_flat(node, x.to(st.float32), pos, upd.to(st.float32),
                             reduction).to(x.dtype)
    if reduction == "add":
        return st.reshape(st.index_put(flat, (node.const(pos),), vals, True), *x.shape)
    order = np.argsort(pos, kind="stable")
    sp = pos[order]
    first = np.r_[0, np.flatnonzero(sp[1:] != sp[:-1]) + 1]
    rank = np.empty_like(pos)
    rank[order] = np.arange(pos.size) - np.repeat(first, np.diff(np.r_[first, pos.size]))
    for r in range(int(rank.max()) + 1):
        sel = np.flatnonzero(rank == r)
        p = node.const(pos[sel])
        v = vals if sel.size == pos.size else st.index_select(vals, 0, node.const(sel))
        if reduction != "none":
            v = _REDUCE[reduction](st.index_select(flat, 0, p), v)
        flat = st.index_put(flat, (p,), v)
    return st.reshape(flat, *x.shape)


@handler("ScatterElements", "Scatter")
def scatter_elements(node, inputs, attrs):
    _need(node, inputs, 3)
    x, idx, upd = inputs
    axis = _axis(node, attrs.get("axis", 0), x.ndim)
    if idx.ndim != x.ndim or tuple(idx.shape) != tuple(upd.shape):
        raise node.fail(f"indices {tuple(idx.shape)} and updates {tuple(upd.shape)} must have "
                        f"the same shape and the rank of data {tuple(x.shape)}")
    if any(i > n for i, n in zip(idx.shape, x.shape)):
        raise node.fail(f"indices {tuple(idx.shape)} are larger than data {tuple(x.shape)}")
    a = _index_array(node, idx, x.shape[axis])
    grids = list(np.indices(a.shape, sparse=True, dtype=np.int64)) if a.ndim else []
    if a.ndim:
        grids[axis] = a
    strides = _strides(x.shape)
    pos = sum((g * s for g, s in zip(grids, strides)), np.zeros(a.shape, np.int64))
    return _scatter_flat(node, x, pos, upd, attrs.get("reduction", "none"))


@handler("ScatterND")
def scatter_nd(node, inputs, attrs):
    _need(node, inputs, 3)
    x, idx, upd = inputs
    a = _index_array(node, idx)
    pos, inner = _nd_positions(node, x.shape, a, 0)
    k = a.shape[-1]
    want = tuple(a.shape[:-1]) + tuple(x.shape[k:])
    if tuple(upd.shape) != want:
        raise node.fail(f"updates {tuple(upd.shape)} must have shape {want}")
    pos = pos[..., None] * inner + np.arange(inner, dtype=np.int64)
    return _scatter_flat(node, x, pos, upd, attrs.get("reduction", "none"))


@handler("TensorScatter")
def tensor_scatter(node, inputs, attrs):
    _need(node, inputs, 2)
    cache, upd = inputs[0], inputs[1]
    axis = _axis(node, attrs.get("axis", -2), cache.ndim)
    mode = attrs.get("mode", "linear")
    if mode not in ("linear", "circular") or axis == 0:
        raise node.fail(f"mode {mode!r} on axis {axis} is not supported")
    if upd.ndim != cache.ndim or any(u != c for i, (u, c) in enumerate(zip(upd.shape,
                                     cache.shape)) if i != axis) or upd.shape[axis] > \
            cache.shape[axis]:
        raise node.fail(f"update {tuple(upd.shape)} does not fit cache {tuple(cache.shape)}")
    nb, n = cache.shape[0], cache.shape[axis]
    w = (_index_array(node, inputs[2]) if len(inputs) > 2 and inputs[2] is not None
         else np.zeros(nb, np.int64)).reshape(nb, *([1] * (cache.ndim - 1)))
    grids = list(np.indices(upd.shape, sparse=True, dtype=np.int64))
    seq = grids[axis] + w
    if mode == "circular":
        seq = seq % n
    elif (seq >= n).any():
        raise node.fail(f"write indices run past the cache length {n}")
    grids[axis] = seq
    pos = sum((g * s for g, s in zip(grids, _strides(cache.shape))), np.zeros(upd.shape,
                                                                             np.int64))
    return _scatter_flat(node, cache, pos, upd, "none")


@handler("Compress")
def compress(node, inputs, attrs):
    _need(node, inputs, 2)
    x, cond = inputs
    keep = np.flatnonzero(np.asarray(cond._numpy()).reshape(-1))
    if "axis" in attrs:
        axis = _axis(node, attrs["axis"], x.ndim)
    else:
        x, axis = st.reshape(x, -1), 0
    if keep.size and keep[-1] >= x.shape[axis]:
        raise node.fail(f"condition selects index {keep[-1]} beyond axis size "
                        f"{x.shape[axis]}")
    return _in_float(st.index_select, x, axis, node.const(keep.astype(np.int64)))


@handler("ReverseSequence")
def reverse_sequence(node, inputs, attrs):
    _need(node, inputs, 2)
    x = inputs[0]
    if x.ndim < 2:
        raise node.fail(f"input must have rank >= 2, got shape {tuple(x.shape)}")
    t_ax = _axis(node, attrs.get("time_axis", 0), x.ndim)
    b_ax = _axis(node, attrs.get("batch_axis", 1), x.ndim)
    if t_ax == b_ax or {t_ax, b_ax} != {0, 1}:
        raise node.fail(f"time_axis {t_ax} and batch_axis {b_ax} must be 0 and 1")
    lens = _index_array(node, inputs[1])
    nt, nb = x.shape[t_ax], x.shape[b_ax]
    if lens.shape != (nb,) or (lens < 0).any() or (lens > nt).any():
        raise node.fail(f"sequence_lens {lens.tolist()} must be {nb} lengths in [0, {nt}]")
    t = np.arange(nt)[:, None]
    src = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)  # (time, batch)
    if t_ax == 1:
        src = src.T
    src = src.reshape(src.shape + (1,) * (x.ndim - 2))
    idx = st.expand(node.const(np.ascontiguousarray(src)), *x.shape).contiguous()
    return _in_float(st.gather, x, t_ax, idx)


# ---- rearrangements ----------------------------------------------------------------------------


def _block(node, x, attrs) -> int:
    b = int(attrs.get("blocksize", 0))
    if x.ndim != 4 or b < 1:
        raise node.fail(f"needs a 4-d input and a positive blocksize, got {tuple(x.shape)} and "
                        f"{b}")
    return b


@handler("DepthToSpace")
def depth_to_space(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    b = _block(node, x, attrs)
    n, c, h, w = x.shape
    if c % (b * b):
        raise node.fail(f"channels {c} are not divisible by blocksize^2 = {b * b}")
    if attrs.get("mode", "DCR") == "DCR":
        y = st.reshape(x, n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = st.reshape(x, n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return st.reshape(y, n, c // (b * b), h * b, w * b)


@handler("SpaceToDepth")
def space_to_depth(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    b = _block(node, x, attrs)
    n, c, h, w = x.shape
    if h % b or w % b:
        raise node.fail(f"spatial size {(h, w)} is not divisible by blocksize {b}")
    y = st.reshape(x, n, c, h // b, b, w // b, b)
    perm = (0, 3, 5, 1, 2, 4) if attrs.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    return st.reshape(y.permute(*perm), n, c * b * b, h // b, w // b)


# ---- constants and masks -----------------------------------------------------------------------


@handler("ConstantOfShape")
def constant_of_shape(node, inputs, attrs):
    _need(node, inputs, 1)
    shape = _ints(inputs[0])
    if any(s < 0 for s in shape):
        raise node.fail(f"negative size in shape {shape}")
    value = attrs.get("value")
    v = node.const(np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1))
    if v.numel() != 1:
        raise node.fail(f"value must hold one element, got {v.numel()}")
    return st.full(tuple(shape), _item(v), dtype=v.dtype, device=node.device)


@handler("Range")
def range_(node, inputs, attrs):
    _need(node, inputs, 3)
    start, limit, delta = (_item(v) for v in inputs)
    if delta == 0:
        raise node.fail("delta is 0")
    dt = inputs[0].dtype
    n = max(math.ceil((limit - start) / delta), 0)
    if dt.is_floating_point:
        r = st.arange(n, dtype=st.float64, device=node.device) * float(delta) + float(start)
        return r if dt is st.float64 else r.to(dt)
    r = st.arange(n, dtype=st.int64, device=node.device) * int(delta) + int(start)
    return r if dt is st.int64 else r.to(dt)


@handler("Trilu")
def trilu(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if x.ndim < 2:
        raise node.fail(f"input must have rank >= 2, got shape {tuple(x.shape)}")
    k = _ints(inputs[1])[0] if len(inputs) > 1 and inputs[1] is not None else 0
    return st.triu(x, k) if attrs.get("upper", 1) else st.tril(x, k)


@handler("EyeLike")
def eye_like(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if x.ndim != 2:
        raise node.fail(f"input must be 2-d, got shape {tuple(x.shape)}")
    dt = st_dtype(attrs["dtype"], node.name) if "dtype" in attrs else x.dtype
    n, m = x.shape
    rows = st.reshape(st.arange(n, device=node.device), n, 1)
    diag = st.eq(st.arange(m, device=node.device) - rows, int(attrs.get("k", 0)))
    return diag.to(dt)


@handler("OneHot")
def one_hot(node, inputs, attrs):
    _need(node, inputs, 3)
    idx, depth, values = inputs
    d = int(_item(depth))
    if d < 1 or values.numel() != 2:
        raise node.fail(f"needs depth >= 1 and two values, got depth {d} and "
                        f"{values.numel()} values")
    axis = int(attrs.get("axis", -1))
    rank = idx.ndim + 1
    if not -rank <= axis < rank:
        raise node.fail(f"axis {axis} is out of range for an output of rank {rank}")
    axis = axis + rank if axis < 0 else axis
    idx = idx.to(st.int64)  # float indices truncate, as ONNX casts them
    idx = st.where(idx < 0, idx + d, idx)
    classes = st.reshape(st.arange(d, device=node.device), d, *([1] * (rank - 1 - axis)))
    hit = st.eq(st.unsqueeze(idx, axis), classes)
    vals = st.reshape(values, -1)
    out = st.where(hit, st.select(vals, 0, 1), st.select(vals, 0, 0))
    return out if out.dtype is vals.dtype else out.to(vals.dtype)  # where widens half types


@handler("NonZero")
def nonzero_(node, inputs, attrs):
    _need(node, inputs, 1)
    # an int64 output with no gradient: numpy computes it
    a = np.asarray(inputs[0]._numpy())
    return node.const(np.array(np.nonzero(a) if a.ndim else np.nonzero(a.reshape(1))[:0],
                               dtype=np.int64).reshape(a.ndim, -1))


@handler("Unique")
def unique(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    axis = attrs.get("axis")
    if axis is not None:
        axis = _axis(node, axis, x.ndim)
    # the runs of st.unique (int64 outputs, no gradient); Y is gathered from x to keep its grad
    runs = _distinct("Unique", x, axis, False)
    first, inverse, counts = runs.first, runs.inverse.reshape(-1), runs.counts
    if not attrs.get("sorted", 1):  # in order of first occurrence
        order = st.argsort(first, stable=True)
        first, counts = first[order], counts[order]
        inverse = st.argsort(order)[inverse]
    y = _in_float(st.index_select, x.reshape(-1) if axis is None else x,
                  0 if axis is None else axis, first)
    return y, first, inverse, counts
