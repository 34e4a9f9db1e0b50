"""PyTorch's legacy typed constructors (`st.FloatTensor(2, 3)`, `st.LongTensor([1, 2])`) and
`Tensor.type()`.

Each legacy type is a class whose instances are never made: calling it makes an ordinary
Tensor of its dtype, and `isinstance(x, st.FloatTensor)` holds for float32 CPU tensors (the
`torch.cuda.*` twins, `st.cuda.FloatTensor`, for float32 CUDA tensors), as PyTorch's legacy
type checks do. Called with sizes a legacy constructor makes zeros (PyTorch leaves the memory
uninitialised; zeros are one of its possible contents and keep runs reproducible).

`Tensor.type()` returns PyTorch's own strings, "torch.FloatTensor" or
"torch.cuda.FloatTensor", so scripts that compare them keep working; `Tensor.type(t)` converts
to a dtype, a legacy type or such a string (with the prefix "torch." or "singa_tensor.").

int8, uint8 and int16 have no dtype here, so ByteTensor, CharTensor and ShortTensor are absent.

Example:
    >>> import singa_tensor as st
    >>> x = st.FloatTensor([1.0, 2.0])
    >>> isinstance(x, st.FloatTensor), isinstance(x, st.LongTensor), st.LongTensor(2).tolist()
    (True, False, [0, 0])
"""

from __future__ import annotations

import numbers

import numpy as np

from . import creation as _cr
from . import dtype as _dt
from .ops._registry import bind_method
from .tensor import Tensor

_NAMES = {
    "FloatTensor": _dt.float32, "DoubleTensor": _dt.float64, "HalfTensor": _dt.float16,
    "BFloat16Tensor": _dt.bfloat16, "IntTensor": _dt.int32, "LongTensor": _dt.int64,
    "BoolTensor": _dt.bool_,
}


class _LegacyType(type):
    """The metaclass: calling a legacy type builds a tensor, isinstance checks dtype and device
    type."""

    dtype: _dt.DType
    is_cuda: bool

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and (obj.device.type == "cuda") == cls.is_cuda)

    def __call__(cls, *args, device=None):
        where = "cuda" if cls.is_cuda else "cpu"
        if device is not None and _cr._device(device).type != where:
            raise RuntimeError(f"{cls.__name__}: legacy constructor expects device type {where}, "
                               f"got {device}")
        dev = (device or "cuda") if cls.is_cuda else "cpu"
        if not args:
            return _cr.zeros(0, dtype=cls.dtype, device=dev)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return _cr.zeros(*args, dtype=cls.dtype, device=dev)
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Tensor):
                if not isinstance(data, cls):
                    raise TypeError(f"{cls.__name__}: expected {_type_name(cls.dtype, where)}, "
                                    f"got {data.type()}")
                return data
            if isinstance(data, (list, tuple, np.ndarray)) or isinstance(data, numbers.Number):
                if isinstance(data, numbers.Number):
                    raise TypeError(f"{cls.__name__}: a single number is not a size or data; "
                                    f"give an int size or a list of values, got {data!r}")
                return _cr.tensor(data, dtype=cls.dtype, device=dev)
        raise TypeError(f"{cls.__name__}: expected sizes (ints) or one sequence of values, got "
                        f"({', '.join(type(a).__name__ for a in args)})")

    def __repr__(cls) -> str:
        return f"<class '{_type_name(cls.dtype, 'cuda' if cls.is_cuda else 'cpu')}'>"


def _make(name: str, d: _dt.DType, is_cuda: bool) -> type:
    doc = (f"Legacy constructor of {d.name} {'CUDA' if is_cuda else 'CPU'} tensors; "
           f"isinstance(x, {name}) tests dtype and device.")
    return _LegacyType(name, (), {"dtype": d, "is_cuda": is_cuda, "__doc__": doc,
                                  "__module__": "singa_tensor" + (".cuda" if is_cuda else "")})


CPU_TYPES = {n: _make(n, d, False) for n, d in _NAMES.items()}
CUDA_TYPES = {n: _make(n, d, True) for n, d in _NAMES.items()}
_BY_DTYPE = {(d, False): n for n, d in _NAMES.items()}


def _type_name(d: _dt.DType, device_type: str) -> str:
    name = _BY_DTYPE[(d, False)]
    return f"torch.cuda.{name}" if device_type == "cuda" else f"torch.{name}"


def _parse(op: str, s: str):
    rest = s
    for prefix in ("torch.", "singa_tensor."):
        if rest.startswith(prefix):
            rest = rest[len(prefix):]
            break
    else:
        rest = None
    device = "cpu"
    if rest is not None and rest.startswith("cuda."):
        rest, device = rest[5:], "cuda"
    if rest in _NAMES:
        return _NAMES[rest], device
    if s in _dt._NAMES:
        return _dt._NAMES[s], None
    raise ValueError(f"{op}: invalid type {s!r} (expected e.g. 'torch.FloatTensor', "
                     f"'torch.cuda.LongTensor' or a dtype)")


def tensor_type(self: Tensor, dtype=None, non_blocking: bool = False):
    """With no argument, the tensor's legacy type name ("torch.FloatTensor",
    "torch.cuda.LongTensor"); with a dtype, a legacy type or such a name, the tensor converted
    to it (itself when nothing changes).

    Example:
        >>> import singa_tensor as st
        >>> x = st.ones(2)
        >>> x.type(), x.type(st.int64).type(), x.type("torch.DoubleTensor").dtype
        ('torch.FloatTensor', 'torch.LongTensor', singa_tensor.float64)
    """
    if dtype is None:
        return _type_name(self.dtype, self.device.type)
    device = None
    if isinstance(dtype, _LegacyType):
        d, device = dtype.dtype, ("cuda" if dtype.is_cuda else "cpu")
    elif isinstance(dtype, str):
        d, device = _parse("Tensor.type", dtype)
    elif isinstance(dtype, _dt.DType):
        d = dtype
    else:
        raise TypeError(f"Tensor.type: expected a dtype, a legacy type or a type name, got "
                        f"{dtype!r}")
    if device is not None and device != self.device.type:
        return self.to(dtype=d, device=device)
    return self.to(d)


bind_method(tensor_type, "type")
