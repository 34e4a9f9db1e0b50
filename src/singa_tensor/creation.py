"""Tensor factories: from data, filled, ranges and random draws."""

from __future__ import annotations

import math
import numbers
import weakref

import numpy as np

from . import _execution
from . import backend as _backend
from . import dtype as _dt
from . import random as _random
from .tensor import Tensor

_default_device = _backend.CPU


def set_default_device(device) -> None:
    """The device of tensors created without an explicit device (initially "cpu"); the test
    suite sets it from SINGA_TENSOR_DEVICE to rerun on CUDA.

    Example:
        >>> import singa_tensor as st
        >>> st.set_default_device("cpu"); st.zeros(1).device
        device(type='cpu')
    """
    global _default_device
    device = _backend.as_device(device)
    _backend.get(device)  # a clear error now rather than at the next tensor
    _default_device = device


def set_default_dtype(d) -> None:
    """The dtype of floating point tensors made without an explicit dtype (factories, and
    `tensor` of Python floats): float32 (initially) or float64.

    Example:
        >>> import singa_tensor as st
        >>> st.set_default_dtype(st.float64); st.tensor([1.0]).dtype
        singa_tensor.float64
        >>> st.set_default_dtype(st.float32); st.zeros(1).dtype
        singa_tensor.float32
    """
    d = _dt.as_dtype(d)
    if d not in (_dt.float32, _dt.float64):
        raise TypeError(f"set_default_dtype: only float32 and float64 can be the default, "
                        f"got {d.name}")
    _dt.set_default_float(d)


def get_default_dtype():
    """The dtype of floating point tensors made without an explicit dtype.

    Example:
        >>> import singa_tensor as st
        >>> st.get_default_dtype()
        singa_tensor.float32
    """
    return _dt.default_float()


def get_default_device():
    """The device of tensors created without an explicit device."""
    return _default_device


def _device(device):
    return _default_device if device is None else _backend.as_device(device)


def _shape_arg(op: str, shape, size=None) -> tuple:
    if size is not None:  # PyTorch's keyword form: zeros(size=(2, 3))
        if shape:
            raise TypeError(f"{op}: got the shape both as arguments {tuple(shape)} and as "
                            f"size={size!r}")
        shape = (size,) if isinstance(size, (int, np.integer)) else (tuple(size),)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = []
    for s in shape:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"{op}: shape must be ints, got {type(s).__name__} in {shape}")
        if s < 0:
            raise ValueError(f"{op}: negative dimension {s} in shape {tuple(shape)}")
        out.append(int(s))
    return tuple(out)


def _finish(t: Tensor, requires_grad: bool, op: str) -> Tensor:
    if requires_grad:
        if not t.dtype.is_floating_point:
            raise RuntimeError(
                f"{op}: only floating point tensors can require gradients, got {t.dtype.name}"
            )
        t.requires_grad = True
    return t


def _from_array(a: np.ndarray, dtype, device) -> Tensor:
    """A new tensor holding a copy of numpy array a (any dtype numpy can cast)."""
    device = _device(device)
    if dtype is _dt.bfloat16:
        return _from_array(a, _dt.float32, device).to(_dt.bfloat16)
    flat = np.ascontiguousarray(a, dtype=dtype.np).reshape(-1).copy()
    if dtype is _dt.bool_:
        flat = flat.view(np.uint8)
    cpu = _backend.get(_backend.CPU)
    t = Tensor._make(cpu.from_numpy(flat, dtype), tuple(a.shape), None, 0, dtype, _backend.CPU,
                     cpu)
    return t if device.type == "cpu" else t.to(device)


def _int_bounds(d) -> tuple | None:
    """(min, max) of an integer dtype d; None for floating point and bool."""
    if d.is_floating_point or d is _dt.bool_:
        return None
    info = np.iinfo(d.np)
    return int(info.min), int(info.max)


def _overflow(op: str, value, d) -> OverflowError:
    lo, hi = _int_bounds(d)
    return OverflowError(f"{op}: value {value} overflows {d.name} (range [{lo}, {hi}])")


def _check_range(op: str, a: np.ndarray, d) -> None:
    """Raise OverflowError when a value of a does not fit the integer dtype d (numpy's
    conversion would wrap it around silently)."""
    bounds = _int_bounds(d)
    if bounds is None or not a.size or a.dtype.kind not in "iuf":
        return
    if a.dtype.kind in "iu" and np.can_cast(a.dtype, d.np, "safe"):
        return
    lo, hi = a.min(), a.max()
    if a.dtype.kind == "f":  # float(2**63) == 2**63: compare against the exclusive bound
        if lo < bounds[0] or hi >= -float(bounds[0]):
            raise _overflow(op, lo if lo < bounds[0] else hi, d)
    elif int(lo) < bounds[0] or int(hi) > bounds[1]:
        raise _overflow(op, int(lo) if int(lo) < bounds[0] else int(hi), d)


def _check_scalar(op: str, value, d) -> None:
    bounds = _int_bounds(d)
    if bounds is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return
    if isinstance(value, numbers.Integral):
        if not bounds[0] <= int(value) <= bounds[1]:
            raise _overflow(op, value, d)
    elif math.isfinite(value) and not bounds[0] <= value < -float(bounds[0]):
        raise _overflow(op, value, d)


def _infer_dtype(a: np.ndarray):
    k = a.dtype.kind
    if k == "b":
        return _dt.bool_
    if k in "iu":
        return _dt.int64
    if k == "f":
        return _dt.from_numpy_dtype(a.dtype)
    raise TypeError(f"tensor: cannot make a tensor from data of numpy dtype {a.dtype}")


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor copied from data (nested lists, numbers, numpy arrays or tensors).

    Python floats become float32, ints int64, bools bool; numpy arrays keep their dtype.

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([[1, 2], [3, 4]]).dtype
        singa_tensor.int64
        >>> st.tensor([0.5], dtype=st.float64, requires_grad=True).requires_grad
        True
    """
    if isinstance(data, Tensor):
        out = data.detach().clone()
        if dtype is not None:
            out = out.to(_dt.as_dtype(dtype))
        if device is not None:
            out = out.to(device)
        return _finish(out, requires_grad, "tensor")
    if isinstance(data, np.ndarray):
        a = data
        infer = _dt.from_numpy_dtype(a.dtype) if a.dtype.kind != "b" else _dt.bool_
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
            data = _lists_of_tensors(data)
        try:
            a = np.asarray(data)
        except (ValueError, TypeError) as e:
            raise ValueError(f"tensor: could not convert data to a tensor ({e})") from None
        if (a.dtype.kind == "f" and a.size and not isinstance(data, np.generic)
                and np.abs(a).max() >= 2.0**63):
            # numpy turns ints past int64 that it cannot hold as uint64 into floats: look at
            # the data as given (only here, where such values are)
            a = np.asarray(data, dtype=object)
        if a.dtype == object and _object_overflow(a, dtype):
            a = a.astype(np.float64)
        if a.dtype == object:
            raise TypeError(f"tensor: data must be numbers or nested sequences of numbers with a "
                            f"regular shape, got {type(data).__name__}")
        infer = _infer_dtype(a)
        if infer is _dt.float64 and not isinstance(data, np.generic):
            infer = _dt.default_float()
    d = _dt.as_dtype(dtype) if dtype is not None else infer
    if not d.is_floating_point and a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise ValueError(f"tensor: cannot convert non-finite values to {d.name}")
    _check_range("tensor", a, d)
    return _finish(_from_array(a, d, device), requires_grad, "tensor")


def _object_overflow(a: np.ndarray, dtype) -> bool:
    """numpy gives Python ints beyond 64 bits the object dtype: raise OverflowError naming the
    value that does not fit, or return True when the numbers are meant for a floating point
    dtype (the caller converts them as floats)."""
    flat = a.ravel()
    ints = [v for v in flat if isinstance(v, numbers.Integral) and not isinstance(v, bool)]
    if not all(isinstance(v, numbers.Real) for v in flat):
        return False
    if len(ints) < len(flat) and dtype is None:
        return True  # floats, or ints mixed with floats: a float tensor, as before
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    if d.is_floating_point:
        return True
    if d is _dt.bool_:
        d = _dt.int64
    lo, hi = _int_bounds(d)
    bad = next((v for v in ints if not lo <= v <= hi), None)
    if bad is None:
        return True  # in range: the float values are checked against d as any others
    raise _overflow("tensor", bad, d)


def _flat(xs):
    for v in xs:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _lists_of_tensors(xs):
    return [(_lists_of_tensors(v) if isinstance(v, (list, tuple)) else
             (v.tolist() if isinstance(v, Tensor) else v)) for v in xs]


as_tensor = tensor


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor that shares memory with a C-contiguous, writable numpy array (other arrays are
    copied).

    Example:
        >>> import numpy as np, singa_tensor as st
        >>> a = np.zeros(3, dtype=np.float32)
        >>> t = st.from_numpy(a); a[0] = 5
        >>> t.tolist()
        [5.0, 0.0, 0.0]
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy array, got {type(a).__name__}")
    d = _dt.from_numpy_dtype(a.dtype)
    if d.np != a.dtype or not a.flags.c_contiguous or not a.flags.writeable:
        return tensor(a, dtype=d)
    cpu = _backend.get(_backend.CPU)
    flat = a.reshape(-1)
    if d is _dt.bool_:
        flat = flat.view(np.uint8)
    return Tensor._make(cpu.from_numpy(flat, d), tuple(a.shape), None, 0, d, _backend.CPU, cpu)


def _wrap_host_array(a: np.ndarray, op: str) -> Tensor:
    """A CPU tensor sharing a's memory when its dtype, strides (non-negative, whole
    elements) and writability allow, else a copy. The tensor keeps a alive."""
    d = _dt.from_numpy_dtype(a.dtype)
    item = a.itemsize
    if (d.np != a.dtype or not a.flags.writeable or a.size == 0
            or any(s < 0 or s % item for s in a.strides)):
        return tensor(a, dtype=d, device=_backend.CPU)
    strides = tuple(s // item for s in a.strides)
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, strides))
    flat = np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(item,))
    if d is _dt.bool_:
        flat = flat.view(np.uint8)
    cpu = _backend.get(_backend.CPU)
    return Tensor._make(cpu.from_numpy(flat, d), tuple(a.shape), strides, 0, d, _backend.CPU,
                        cpu)


def from_dlpack(obj) -> Tensor:
    """A tensor sharing memory with any DLPack producer (numpy arrays on the CPU, CuPy
    arrays on CUDA, other frameworks' tensors); the tensor keeps the producer's memory alive.

    Example:
        >>> import numpy as np, singa_tensor as st
        >>> a = np.arange(4.0)
        >>> t = st.from_dlpack(a); a[0] = 9
        >>> t.tolist()
        [9.0, 1.0, 2.0, 3.0]
    """
    return _backend.from_dlpack(obj)


def _new(shape, dtype, device) -> Tensor:
    return Tensor._empty(shape, dtype, _device(device))


def _fill(t: Tensor, value) -> Tensor:
    from .ops._registry import copy_into

    if t.numel():
        copy_into(scalar_tensor(value, t.dtype, t.device), t)
        t._storage.version = 0
    return t


_scalar_cache: dict = {}
# The storages of the cached scalar operands. A recorded graph (graph/_graph.py) holds the ones
# it reads itself: the cache is cleared when it fills, and that must not look to a recording
# like a parameter replaced since it was made.
constant_storages: weakref.WeakSet = weakref.WeakSet()


def scalar_tensor(value, dtype, device) -> Tensor:
    """A 0-d tensor for a Python number used as an operand (cached; never written to)."""
    # 0.0 and -0.0 are equal keys of a dict, yet different operands (x * -0.0, 1 / -0.0)
    key = (value, type(value), dtype, device, value == 0 and math.copysign(1.0, value) < 0)
    t = _scalar_cache.get(key)
    if t is None:
        if len(_scalar_cache) > 512:
            _scalar_cache.clear()
        if dtype is _dt.bfloat16:
            t = tensor(value, dtype=_dt.float32, device=device).to(dtype)
        else:
            if not dtype.is_floating_point and isinstance(value, float) and not math.isfinite(
                    value):
                raise ValueError(f"cannot use {value} as a {dtype.name} value")
            t = _from_array(np.asarray(value, dtype=dtype.np), dtype, device)
        _scalar_cache[key] = t
        try:
            constant_storages.add(t._storage)
        except TypeError:  # a storage without weak references: no recording holds it weakly
            pass
    return t


def _dtype_or(dtype, default):
    return _dt.as_dtype(dtype) if dtype is not None else default


def _float_or(dtype):
    return _dt.as_dtype(dtype) if dtype is not None else _dt.default_float()


def empty(*shape, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor.

    Example:
        >>> import singa_tensor as st
        >>> st.empty(2, 3).shape
        (2, 3)
    """
    t = _new(_shape_arg("empty", shape, size), _float_or(dtype), device)
    return _finish(t, requires_grad, "empty")


def zeros(*shape, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(2).tolist()
        [0.0, 0.0]
    """
    t = _fill(_new(_shape_arg("zeros", shape, size), _float_or(dtype), device), 0)
    return _finish(t, requires_grad, "zeros")


def ones(*shape, size=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones.

    Example:
        >>> import singa_tensor as st
        >>> st.ones(2, dtype=st.int32).tolist()
        [1, 1]
    """
    t = _fill(_new(_shape_arg("ones", shape, size), _float_or(dtype), device), 1)
    return _finish(t, requires_grad, "ones")


def full(size=None, fill_value=None, dtype=None, device=None, requires_grad: bool = False,
         *, shape=None) -> Tensor:
    """A tensor filled with fill_value (dtype inferred from it when not given).

    Example:
        >>> import singa_tensor as st
        >>> st.full((2,), 7).tolist()
        [7, 7]
    """
    if shape is None:
        shape = size
    if shape is None or fill_value is None:
        raise TypeError("full: size and fill_value are required, e.g. full((2, 3), 1.0)")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if not isinstance(fill_value, numbers.Number):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    d = _dtype_or(dtype, _dt.bool_ if isinstance(fill_value, bool) else
                  (_dt.int64 if isinstance(fill_value, numbers.Integral) else _dt.default_float()))
    _check_scalar("full", fill_value, d)
    t = _fill(_new(_shape_arg("full", tuple(shape)), d, device), fill_value)
    return _finish(t, requires_grad, "full")


def zeros_like(x: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros with x's shape, dtype and device."""
    return zeros(x.shape, dtype=dtype or x.dtype, device=device or x.device,
                 requires_grad=requires_grad)


def ones_like(x: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Ones with x's shape, dtype and device."""
    return ones(x.shape, dtype=dtype or x.dtype, device=device or x.device,
                requires_grad=requires_grad)


def full_like(x: Tensor, fill_value, dtype=None, device=None,
              requires_grad: bool = False) -> Tensor:
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device or x.device,
                requires_grad=requires_grad)


def empty_like(x: Tensor, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return empty(x.shape, dtype=dtype or x.dtype, device=device or x.device,
                 requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Values from start (inclusive) to end (exclusive) by step.

    Example:
        >>> import singa_tensor as st
        >>> st.arange(5).tolist(), st.arange(0, 1, 0.25).tolist()
        ([0, 1, 2, 3, 4], [0.0, 0.25, 0.5, 0.75])
    """
    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"arange: start, end and step must be numbers, got {v!r}")
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if not all(math.isfinite(float(v)) for v in (start, end, step)):
        raise ValueError("arange: start, end and step must be finite")
    if (end - start) / step < 0:
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    n = max(0, math.ceil((end - start) / step))
    is_int = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    d = _dtype_or(dtype, _dt.int64 if is_int else _dt.default_float())
    for v in (start, start + (n - 1) * step) if n else ():
        _check_scalar("arange", v, d)
    t = _range_fill(n, float(start), float(step), d, device)
    return _finish(t, requires_grad, "arange")


def _range_fill(n, start, step, d, device) -> Tensor:
    from .ops.layout import cast

    work = d if d in (_dt.float32, _dt.float64, _dt.float16, _dt.bfloat16, _dt.int32,
                      _dt.int64) else _dt.float64
    t = _new((n,), work, device)
    if n:
        fn = _kernel(t, f"st_arange_{work.suffix}")
        fn(t._storage.ptr, n, start, step)
    return t if work is d else cast(t, d)


def linspace(start, end, steps: int, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """steps evenly spaced values from start to end, both included.

    Example:
        >>> import singa_tensor as st
        >>> st.linspace(0, 1, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative int, got {steps!r}")
    d = _float_or(dtype)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    work = _dt.float64
    t = _range_fill(steps, float(start), float(step), work, device)
    if steps > 1:  # make the last value exact
        _fill(t._view((1,), (1,), steps - 1), float(end))
    from .ops.layout import cast

    return _finish(cast(t, d) if d is not work else t, requires_grad, "linspace")


def eye(n: int, m: int | None = None, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    """The identity matrix (n x m).

    Example:
        >>> import singa_tensor as st
        >>> st.eye(2, 3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    m = n if m is None else m
    if not all(isinstance(v, (int, np.integer)) and v >= 0 for v in (n, m)):
        raise ValueError(f"eye: sizes must be non-negative ints, got {n}, {m}")
    t = zeros(n, m, dtype=dtype, device=device)
    k = min(n, m)
    if k:
        diag = t._view((k,), (m + 1,), 0)
        _fill(diag, 1)
    return _finish(t, requires_grad, "eye")


def _kernel(t: Tensor, symbol: str):
    """The backend's kernel `symbol` for t, through the execution context while one runs (graph
    mode records the call)."""
    fn = t._be.kernel(symbol)
    if fn is None:
        raise TypeError(f"{symbol}: not implemented on {t.device}")
    ex = _execution.current() if _execution.running_count else None
    return ex.kernel(fn, symbol, t._be) if ex is not None else fn


# ---- random ------------------------------------------------------------------------------------


def _gen(generator):
    if generator is None:
        return _random.default_generator
    if not isinstance(generator, _random.Generator):
        raise TypeError(f"expected a st.Generator, got {type(generator).__name__}")
    return generator


def _random_fill(op: str, kind: str, shape, dtype, device, generator, a: float, b: float):
    d = _float_or(dtype)
    if not d.is_floating_point:
        raise TypeError(f"{op}: dtype must be floating point, got {d.name}")
    # every float dtype has fills of its own (float16/bfloat16: the float32 draw rounded once)
    t = _new(shape, d, device)
    n = t.numel()
    per_block = 2 if d is _dt.float64 else 4
    seed, offset = _gen(generator)._take((n + per_block - 1) // per_block)
    if n:
        _kernel(t, f"st_{kind}_{d.suffix}")(t._storage.ptr, n, seed, offset, a, b)
    return t


def rand(*shape, size=None, generator=None, dtype=None, device=None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1).

    Example:
        >>> import singa_tensor as st
        >>> x = st.rand(1000)
        >>> bool((x >= 0).all()) and bool((x < 1).all())
        True
    """
    t = _random_fill("rand", "uniform", _shape_arg("rand", shape, size), dtype, device, generator,
                     0.0, 1.0)
    return _finish(t, requires_grad, "rand")


def randn(*shape, size=None, generator=None, dtype=None, device=None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples.

    Example:
        >>> import singa_tensor as st
        >>> abs(st.randn(10000).mean().item()) < 0.05
        True
    """
    t = _random_fill("randn", "normal", _shape_arg("randn", shape, size), dtype, device, generator,
                     0.0, 1.0)
    return _finish(t, requires_grad, "randn")


def uniform(shape, low: float, high: float, generator=None, dtype=None, device=None) -> Tensor:
    """Uniform samples in [low, high)."""
    return _random_fill("uniform", "uniform", _shape_arg("uniform", tuple(shape)), dtype, device,
                        generator, float(low), float(high))


def normal(mean: float, std: float, size, generator=None, dtype=None, device=None) -> Tensor:
    """Normal samples with the given mean and standard deviation."""
    if std < 0:
        raise ValueError(f"normal: std must be non-negative, got {std}")
    return _random_fill("normal", "normal", _shape_arg("normal", tuple(size)), dtype, device,
                        generator, float(mean), float(std))


def randint(low, high=None, size=None, generator=None, dtype=None, device=None) -> Tensor:
    """Integers drawn uniformly from [low, high).

    Example:
        >>> import singa_tensor as st
        >>> x = st.randint(0, 10, (100,))
        >>> x.dtype, 0 <= x.min().item() and x.max().item() < 10
        (singa_tensor.int64, True)
    """
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high  # randint(high, size)
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: size is required, e.g. randint(0, 10, (3,))")
    if not isinstance(low, (int, np.integer)) or not isinstance(high, (int, np.integer)):
        raise TypeError("randint: low and high must be ints")
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    shape = _shape_arg("randint", (size,) if isinstance(size, int) else tuple(size))
    t = _new(shape, _dt.int64, device)
    n = t.numel()
    seed, offset = _gen(generator)._take((n + 1) // 2)
    if n:
        _kernel(t, "st_randint_i64")(t._storage.ptr, n, seed, offset, int(low), int(high))
    d = _dtype_or(dtype, _dt.int64)
    if d is not _dt.int64:
        from .ops.layout import cast

        t = cast(t, d)
    return t


def randperm(n: int, generator=None, dtype=None, device=None) -> Tensor:
    """A random permutation of 0..n-1.

    Example:
        >>> import singa_tensor as st
        >>> sorted(st.randperm(5).tolist())
        [0, 1, 2, 3, 4]
    """
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative int, got {n!r}")
    t = _new((int(n),), _dt.int64, device)
    seed, offset = _gen(generator)._take(int(n))
    if n:
        _kernel(t, "st_randperm_i64")(t._storage.ptr, int(n), seed, offset)
    d = _dtype_or(dtype, _dt.int64)
    if d is not _dt.int64:
        from .ops.layout import cast

        t = cast(t, d)
    return t


def rand_like(x: Tensor, generator=None, dtype=None) -> Tensor:
    return rand(*x.shape, generator=generator, dtype=dtype or x.dtype, device=x.device)


def randn_like(x: Tensor, generator=None, dtype=None) -> Tensor:
    return randn(*x.shape, generator=generator, dtype=dtype or x.dtype, device=x.device)
