"""`finfo` and `iinfo`: the numeric limits of the floating point and integer dtypes."""

from __future__ import annotations

import numpy as np

from . import dtype as _dt

# bfloat16 has no numpy type: float32's exponent with 8 significand bits (7 stored)
_BF16 = dict(bits=16, eps=2.0 ** -7, max=float(np.float32(2.0 ** 127 * (2 - 2.0 ** -7))),
             tiny=2.0 ** -126, resolution=0.01)


class finfo:
    """Machine limits of a floating point dtype (the default dtype when none is given).

    Attributes: bits, eps (gap between 1 and the next value), max, min (= -max), tiny and
    smallest_normal (the smallest positive normal number), resolution (10**-precision,
    precision being the decimal digits the type holds) and dtype (its name).

    Example:
        >>> import singa_tensor as st
        >>> st.finfo(st.float16).max, st.finfo(st.bfloat16).eps, st.finfo().bits
        (65504.0, 0.0078125, 32)
    """

    def __init__(self, type=None):  # noqa: A002  (PyTorch's argument name)
        d = _dt.default_float() if type is None else _dt.as_dtype(type)
        if not d.is_floating_point:
            raise TypeError(f"finfo: {d.name} is not a floating point dtype (use st.iinfo)")
        if d is _dt.bfloat16:
            v = _BF16
        else:
            i = np.finfo(d.np)
            v = dict(bits=int(i.bits), eps=float(i.eps), max=float(i.max),
                     tiny=float(i.smallest_normal), resolution=10.0 ** -int(i.precision))
        self.bits: int = v["bits"]
        self.eps: float = v["eps"]
        self.max: float = v["max"]
        self.min: float = -v["max"]
        self.tiny: float = v["tiny"]
        self.smallest_normal: float = v["tiny"]
        self.resolution: float = v["resolution"]
        self.dtype: str = d.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.smallest_normal}, tiny={self.tiny}, "
                f"dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype: bits, min, max and dtype (its name).

    Example:
        >>> import singa_tensor as st
        >>> st.iinfo(st.int32).max, st.iinfo(st.int64).bits
        (2147483647, 64)
    """

    def __init__(self, type):  # noqa: A002  (PyTorch's argument name)
        d = _dt.as_dtype(type)
        if d.is_floating_point or d is _dt.bool_:
            raise TypeError(f"iinfo: {d.name} is not an integer dtype"
                            + (" (use st.finfo)" if d.is_floating_point else ""))
        i = np.iinfo(d.np)
        self.bits: int = int(i.bits)
        self.min: int = int(i.min)
        self.max: int = int(i.max)
        self.dtype: str = d.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
