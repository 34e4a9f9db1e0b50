"""Element types with no tensor storage: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0),
float6 (E2M3, E3M2), float4 (E2M1), int4/uint4 and int2/uint2.

An imported graph holds such values on the host, as numpy arrays of `ml_dtypes`' types (the
ones `onnx.numpy_helper.to_array` hands out, already unpacked) wrapped in `LowPrecisionArray`,
so that no handler mistakes one for a tensor. They are converted at the boundary: Cast,
CastLike and QuantizeLinear make them from tensors, Cast, CastLike and DequantizeLinear turn
them back into tensors. Identity and the ops that only move elements (Reshape, Transpose,
Slice, Concat, ...) carry them through; Shape and Size read their shape. Every other op
refuses them, naming the node and the element type. They carry no gradient.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from .. import dtype as _dt
from ..tensor import Tensor
from ._handlers import OnnxImportError

# ONNX element type codes held on the host
LOW_PRECISION = {17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
                 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
                 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2", 27: "FLOAT6E2M3", 28: "FLOAT6E3M2"}
FLOAT8 = frozenset((17, 18, 19, 20))  # the types Cast's `saturate` applies to
E8M0 = 24
INTEGER = frozenset((21, 22, 25, 26))
_ROUND_MODES = ("up", "down", "nearest")

# ops that only move elements: run on a tensor of element indices, then gather the elements
_MOVES = frozenset(("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand",
                    "Slice", "Concat", "Split", "Tile", "Gather"))
# ops that read only the shape
_SHAPE_ONLY = frozenset(("Shape", "Size"))
# handlers that take LowPrecisionArray values themselves
_OWN = frozenset(("Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity"))


class LowPrecisionArray:
    """A value of an element type we have no tensor storage for, held on the host.

    `array` is the numpy array (an `ml_dtypes` dtype), `code` its ONNX element type.
    """

    __slots__ = ("array", "code")

    def __init__(self, array: np.ndarray, code: int):
        self.array = array
        self.code = code

    @property
    def shape(self) -> tuple:
        return self.array.shape

    @property
    def ndim(self) -> int:
        return self.array.ndim

    @property
    def type_name(self) -> str:
        return LOW_PRECISION[self.code]

    def __repr__(self) -> str:
        return f"LowPrecisionArray({self.type_name}, shape={self.shape})"


_NP_TYPES: dict = {}


def np_type(code: int):
    """The ml_dtypes scalar type of a low-precision ONNX element type."""
    t = _NP_TYPES.get(code)
    if t is None:
        from onnx import helper

        t = _NP_TYPES[code] = np.dtype(helper.tensor_dtype_to_np_dtype(code))
    return t


def code_of(dtype) -> int | None:
    """The ONNX code of a low-precision numpy dtype, None for any other dtype."""
    if getattr(np.dtype(dtype).type, "__module__", "") != "ml_dtypes":
        return None
    for code in LOW_PRECISION:
        if np_type(code) == dtype:
            return code
    return None


def wrap(a: np.ndarray, where: str) -> LowPrecisionArray:
    """An ml_dtypes array as a LowPrecisionArray; a clear error for types ONNX does not have."""
    code = code_of(a.dtype)
    if code is None:
        raise OnnxImportError(f"{where}: element type {a.dtype} is not supported")
    return LowPrecisionArray(a if a.flags.c_contiguous else a.copy(), code)


# ---- conversions ---------------------------------------------------------------------------------


def to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """x as float8 E8M0 (powers of two 2**-127 .. 2**127, no sign, no zero, 0xFF is NaN).

    The biased exponent of x as float32 is the result's; the significand decides whether it
    moves up one ("up": any fraction; "nearest": at least half, ties to the larger unless x is
    subnormal; "down": never). NaN and infinities become NaN, the sign is dropped; with
    saturate a step past the largest power stays there instead of becoming NaN.
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.uint16)
    frac = bits & 0x7FFFFF
    special = exp == 0xFF
    if round_mode == "up":
        step = frac != 0
    elif round_mode == "nearest":
        half = (frac & 0x400000) != 0
        step = half & (((frac & 0x3FFFFF) != 0) | (exp > 0))
    else:
        step = np.zeros(exp.shape, bool)
    step &= ~special
    if saturate:
        step &= exp != 0xFE
    out = np.where(special, 0xFF, exp + step).astype(np.uint8)
    return out.view(np_type(E8M0))


def cast_array(a: np.ndarray, code: int, saturate: bool = True,
               round_mode: str = "up") -> np.ndarray:
    """numpy array a as ONNX element type code, with Cast's semantics: to float8 with saturate,
    values beyond the largest finite one (infinities included) clamp to it; without, they
    become infinity or NaN as the type has them. Rounding is to nearest even, except for
    E8M0 (round_mode)."""
    if code == E8M0:
        return to_e8m0(a, saturate, round_mode)
    t = np_type(code) if code in LOW_PRECISION else None
    if t is None:
        from onnx import helper

        t = np.dtype(helper.tensor_dtype_to_np_dtype(code))
    if code in FLOAT8 and saturate:
        import ml_dtypes

        info = ml_dtypes.finfo(t)
        a = np.clip(a, info.min, info.max)
    with np.errstate(invalid="ignore", over="ignore"):
        return a.astype(t)


def host_values(v, code: int = 0) -> np.ndarray:
    """A value as a numpy array: a tensor in its declared ONNX type (narrow integers are held
    in int64), a LowPrecisionArray as its array. Tensors are detached: a low-precision result
    carries no gradient."""
    if isinstance(v, LowPrecisionArray):
        return v.array
    from ._graph import _to_numpy

    return _to_numpy(v.detach(), code)


def to_tensor(v: LowPrecisionArray, device) -> Tensor:
    """The values as a tensor: float32 for the float types (exact for all of them), int64 for
    the integer ones."""
    dtype = np.int64 if v.code in INTEGER else np.float32
    return creation.tensor(v.array.astype(dtype), device=device)


def tensor_code(t: Tensor) -> int:
    """The ONNX element type of a tensor's dtype."""
    return {_dt.float32: 1, _dt.float64: 11, _dt.float16: 10, _dt.bfloat16: 16,
            _dt.int32: 6, _dt.int64: 7, _dt.bool_: 9}[t.dtype]


def cast_options(node, attrs) -> tuple[bool, str]:
    """Cast's (saturate, round_mode) attributes, checked."""
    saturate = attrs.get("saturate", 1)
    if saturate not in (0, 1):
        raise node.fail(f"attribute saturate must be 0 or 1, got {saturate}")
    mode = attrs.get("round_mode", "up")
    if mode not in _ROUND_MODES:
        raise node.fail(f"attribute round_mode must be one of {', '.join(_ROUND_MODES)}, "
                        f"got {mode!r}")
    return bool(saturate), mode


def cast(node, x, to: int, attrs, src_code: int = 0):
    """Cast of x (tensor or LowPrecisionArray) to ONNX type `to` where one side is a
    low-precision type: converts through numpy, as the ONNX reference does."""
    saturate, mode = cast_options(node, attrs)
    if x is None:
        raise node.fail("input is missing")
    a = host_values(x, src_code)
    if to in LOW_PRECISION:
        return LowPrecisionArray(cast_array(a, to, saturate, mode), to)
    from onnx import helper

    from ._graph import st_dtype

    try:
        st_dtype(to, "cast")
    except OnnxImportError:
        raise node.fail(f"cannot cast {LOW_PRECISION[x.code]} to "
                        f"{_type_name(to)}") from None
    return node.const(a.astype(helper.tensor_dtype_to_np_dtype(to)))


def from_tensor(t: Tensor, code: int) -> LowPrecisionArray:
    """A tensor whose values are already in the range of low-precision type code."""
    return LowPrecisionArray(cast_array(host_values(t), code), code)


def _type_name(code: int) -> str:
    import onnx

    if code in onnx.TensorProto.DataType.values():
        return onnx.TensorProto.DataType.Name(code)
    return str(code)


# ---- other ops on low-precision values -------------------------------------------------------


def _value_codes(t) -> list:
    """The element types a TypeProto names (through sequences, optionals and maps)."""
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        return [getattr(t, kind).elem_type]
    if kind in ("sequence_type", "optional_type"):
        return _value_codes(getattr(t, kind).elem_type)
    if kind == "map_type":
        return _value_codes(t.map_type.value_type)
    return []


def mentions_low_precision(graph) -> bool:
    """Whether a GraphProto (its subgraphs included) states a low-precision element type
    anywhere: a value's type, an initializer, a tensor attribute or a Cast/QuantizeLinear
    target. Only such graphs can hold LowPrecisionArrays, and only their handlers are guarded
    (`guard_steps`), so that other graphs pay nothing per node."""
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if any(c in LOW_PRECISION for c in _value_codes(vi.type)):
            return True
    if any(t.data_type in LOW_PRECISION for t in graph.initializer):
        return True
    return any(_attr_mentions(a) for n in graph.node for a in n.attribute)


def _attr_mentions(a) -> bool:
    import onnx

    A = onnx.AttributeProto
    if a.type == A.INT:
        return a.name in ("to", "output_dtype") and a.i in LOW_PRECISION
    if a.type == A.TENSOR:
        return a.t.data_type in LOW_PRECISION
    if a.type == A.TENSORS:
        return any(t.data_type in LOW_PRECISION for t in a.tensors)
    if a.type == A.GRAPH:
        return mentions_low_precision(a.g)
    if a.type == A.GRAPHS:
        return any(mentions_low_precision(g) for g in a.graphs)
    return False


def guard_steps(steps: list) -> list:
    """An execution plan (`_graph.prepare_steps`) whose handlers send inputs that hold
    LowPrecisionArrays to `run_with_host_values`."""
    return [(s[0], _guard(s[1])) + tuple(s[2:]) for s in steps]


def _guard(fn):
    def run(node, args, attrs, _fn=fn):
        if LowPrecisionArray in map(type, args):
            return run_with_host_values(node, _fn, args, attrs)
        return _fn(node, args, attrs)

    return run



def run_with_host_values(node, fn, args: list, attrs):
    """Run node's handler fn on inputs some of which are LowPrecisionArrays (see the module
    docstring for which ops accept them)."""
    op = node.op_type if not node.domain else f"{node.domain}::{node.op_type}"
    if op in _OWN:
        return fn(node, args, attrs)
    hosts = [(i, a) for i, a in enumerate(args) if isinstance(a, LowPrecisionArray)]
    first = hosts[0][1]
    if op in _SHAPE_ONLY:
        return fn(node, [_positions(a, 0, node.device) if isinstance(a, LowPrecisionArray)
                         else a for a in args], attrs)
    if op not in _MOVES:
        raise node.fail(f"input {node.inputs[hosts[0][0]]!r} has element type "
                        f"{first.type_name}, which this op does not take (only Cast, CastLike, "
                        "DequantizeLinear and ops that move elements, such as Reshape, do)")
    if any(a.code != first.code for _, a in hosts):
        raise node.fail("inputs of different element types: "
                        + ", ".join(a.type_name for _, a in hosts))
    # every element gets its position in one buffer holding all host inputs; the op moves
    # the positions, and the result's elements are read back from the buffer
    offsets, parts, n = {}, [], 0
    for i, a in hosts:
        offsets[i] = n
        parts.append(a.array.reshape(-1))
        n += a.array.size
    buf = np.concatenate(parts) if len(parts) > 1 else parts[0]
    pos = [_positions(a, offsets[i], node.device) if i in offsets else a
           for i, a in enumerate(args)]
    out = fn(node, pos, attrs)

    def back(v):
        if not isinstance(v, Tensor):
            return v
        idx = v.cpu().numpy().astype(np.int64, copy=False)
        return LowPrecisionArray(buf[idx.reshape(-1)].reshape(idx.shape), first.code)

    if isinstance(out, (tuple, list)):
        return type(out)(back(v) for v in out)
    return back(out)


def _positions(a: LowPrecisionArray, start: int, device) -> Tensor:
    n = a.array.size
    return creation.tensor(np.arange(start, start + n, dtype=np.int64).reshape(a.shape),
                           dtype=_dt.int64, device=device)


__all__ = ["LowPrecisionArray", "LOW_PRECISION", "cast", "cast_array", "to_tensor",
           "mentions_low_precision", "guard_steps", "run_with_host_values"]
