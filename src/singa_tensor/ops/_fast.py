"""The C fast path of plain elementwise calls (`singa_tensor._fastpath`, cpp/python/fastpath.c).

A plain call is one on contiguous CPU tensors of one dtype (and, for binary ops, one shape),
outside graph mode: the output is a new contiguous tensor of the same shape and a single kernel
call fills it. The C module makes that tensor and calls the kernel without a Python frame; it
returns None for every other call, which then takes the op's Python path (promotion,
broadcasting, strided inputs, other devices, graph capture). Results are the same kernels' on
the same buffers, bit for bit; only the Python around them is skipped.

`set_enabled(False)` turns the fast path off (tests compare both paths; a debugging aid), and the
environment variable SINGA_TENSOR_FASTPATH=0 does so at import.
"""

from __future__ import annotations

import os

from .. import _execution
from .. import dtype as _dt
from ..backend import cpu as _cpu
from ..tensor import _STRIDES, Tensor, contiguous_strides

try:
    from .. import _fastpath as _C
except ImportError:  # pragma: no cover - built with the package; a source tree without it runs
    _C = None  # the Python path only

# the dtypes the module handles, in its table's order (the C side reads the first four as
# float32, float64, int32, int64 when it converts a Python number operand)
DTYPES = (_dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.float16, _dt.bfloat16, _dt.bool_)


def _set_up() -> bool:
    if _C is None:
        return False
    storage, cdata, probe, probe_value, small, small_bytes, empty = _cpu.fast_alloc_info()
    table = [(d, d.itemsize, d.storage, _cpu.array_type(d)) for d in DTYPES]
    ok = _C.set_up(Tensor, storage, cdata, probe, probe_value, _cpu, _execution, small,
                   small_bytes, empty, _STRIDES, contiguous_strides, table)
    if os.environ.get("SINGA_TENSOR_FASTPATH", "").strip() == "0":
        _C.set_enabled(False)
    return bool(ok)


available = _set_up()


def enabled() -> bool:
    """Whether plain elementwise calls run through the C fast path."""
    return _C is not None and _C.enabled()


def set_enabled(on: bool) -> bool:
    """Turn the C fast path on or off; returns whether it was on. Where the module is missing
    (a source tree without the build) it stays off."""
    if _C is None:
        return False
    return _C.set_enabled(bool(on) and available)


_HANDLES: dict = {}


def handle(kind: str, op: str, dtypes=DTYPES) -> int:
    """Register kernel st_<op>_<suffix> for each of dtypes with the C module ("binary" or
    "unary" signature); returns its handle (the same one for the same request), -1 where there
    is no module or its table (256 entries) is full: calls with -1 take the Python path."""
    if _C is None:
        return -1
    key = (kind, op, tuple(d for d in DTYPES if d in dtypes))
    h = _HANDLES.get(key)
    if h is None:
        addrs = [_cpu.kernel_address(f"st_{op}_{d.suffix}") if d in dtypes else 0
                 for d in DTYPES]
        try:
            h = _C.add_kernel(kind, addrs)
        except ValueError as e:
            if "table full" not in str(e):
                raise
            h = -1
        _HANDLES[key] = h
    return h


def _declined(*args):
    return None


binary = _C.binary if _C is not None else _declined
unary = _C.unary if _C is not None else _declined
