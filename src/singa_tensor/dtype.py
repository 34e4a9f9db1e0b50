"""Data types and the promotion rules between them (PyTorch's rules)."""

from __future__ import annotations

import numpy as np


class DType:
    """A tensor element type.

    Example:
        >>> import singa_tensor as st
        >>> st.float32.is_floating_point, st.int64.itemsize
        (True, 8)
    """

    __slots__ = ("name", "suffix", "np", "storage", "itemsize", "is_floating_point", "rank",
                 "ctype", "width_suffix")

    def __init__(self, name: str, suffix: str, np_dtype, storage, rank: int, ctype: str):
        self.name = name
        self.suffix = suffix  # kernel symbol suffix: st_<op>_<suffix>
        self.np = np.dtype(np_dtype) if np_dtype is not None else None  # numpy value type
        self.storage = np.dtype(storage)  # what the buffer holds (bfloat16 lives in uint16)
        self.itemsize = self.storage.itemsize
        self.is_floating_point = suffix in ("f16", "bf16", "f32", "f64")
        self.rank = rank  # position in the promotion lattice
        # the C type of one stored element as the kernel ABI declares it (the 16-bit floats
        # as their raw bits), for the backends' cffi buffer and pointer types
        self.ctype = ctype
        # suffix of the layout-only kernels (st_copy_<width_suffix>), which move raw bits
        self.width_suffix = f"b{8 * self.itemsize}"

    def __repr__(self) -> str:
        return f"singa_tensor.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = DType("bool", "u8", np.bool_, np.uint8, 0, "uint8_t")
int32 = DType("int32", "i32", np.int32, np.int32, 1, "int32_t")
int64 = DType("int64", "i64", np.int64, np.int64, 2, "int64_t")
float16 = DType("float16", "f16", np.float16, np.float16, 3, "uint16_t")
bfloat16 = DType("bfloat16", "bf16", None, np.uint16, 3, "uint16_t")
float32 = DType("float32", "f32", np.float32, np.float32, 4, "float")
float64 = DType("float64", "f64", np.float64, np.float64, 5, "double")

_default = [float32]  # creation.set_default_dtype sets it


def default_float() -> DType:
    """The dtype of floating point values made without one (creation.get_default_dtype)."""
    return _default[0]


def set_default_float(d: DType) -> None:
    _default[0] = d


ALL = (bool_, int32, int64, float16, bfloat16, float32, float64)
_NAMES = {d.name: d for d in ALL}
_NAMES.update({"float": float32, "double": float64, "half": float16, "long": int64, "int": int32})

_FROM_NP = {
    np.dtype(np.bool_): bool_,
    np.dtype(np.int8): int32,
    np.dtype(np.int16): int32,
    np.dtype(np.int32): int32,
    np.dtype(np.uint8): int64,
    np.dtype(np.uint16): int32,
    np.dtype(np.uint32): int64,
    np.dtype(np.int64): int64,
    np.dtype(np.uint64): int64,
    np.dtype(np.float16): float16,
    np.dtype(np.float32): float32,
    np.dtype(np.float64): float64,
}


def _by_name(name: str) -> DType:
    return _NAMES[name]


def from_numpy_dtype(dt) -> DType:
    try:
        return _FROM_NP[np.dtype(dt)]
    except (KeyError, TypeError):
        raise TypeError(f"numpy dtype {dt} is not supported by singa_tensor") from None


def as_dtype(d) -> DType:
    """Accept a DType, a name ("float32"), a numpy dtype or a Python type."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str) and d in _NAMES:
        return _NAMES[d]
    if d is float:
        return float32
    if d is int:
        return int64
    if d is bool:
        return bool_
    try:
        return from_numpy_dtype(d)
    except TypeError:
        raise TypeError(f"unknown dtype {d!r}") from None


def promote(a: DType, b: DType) -> DType:
    """Result type of an op on two tensors."""
    if a is b:
        return a
    if a.rank == b.rank == 3:  # float16 with bfloat16
        return float32
    return a if a.rank > b.rank else b


def promote_scalar(t: DType, value) -> DType:
    """Result type of an op between a tensor and a Python scalar: the scalar never widens
    within a category, but a float scalar makes an integer or bool tensor float32."""
    if isinstance(value, bool):
        return t
    if isinstance(value, int):
        return int64 if t is bool_ else t
    if isinstance(value, float):
        return t if t.is_floating_point else _default[0]
    raise TypeError(f"unsupported scalar type {type(value).__name__}")


def scalar_dtype(value) -> DType:
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return float32
    raise TypeError(f"unsupported scalar type {type(value).__name__}")
