"""ONNX import handlers for linear quantization: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul and QLinearConv.

Narrow integer types (uint8, int8, uint16, int16) are held in int64, so the tensor cannot tell
which one a quantized value is: the saturation range comes from the element type the model
declares (`node.input_type`), and the module casts the graph's outputs back to it. Float8,
float6, float4, int4 and int2 results are host arrays (onnx/_lowp.py): QuantizeLinear computes
x / scale with tensors and rounds it to the type on the host (float8 with the `saturate`
attribute), DequantizeLinear turns them back into tensors. Quantized values carry no gradient;
the float side does (DequantizeLinear is differentiable in its scale, QuantizeLinear's result
is a step function of x and gets none). QLinearMatMul and QLinearConv take the 8-bit and
16-bit types only.
"""

from __future__ import annotations

import numpy as np

from .. import dtype as _dt
from ..ops.elementwise import where
from ..ops.reduce import amax, amin
from . import _lowp
from ._graph import st_dtype
from ._handlers import handler
from ._lowp import LowPrecisionArray

# ONNX element type codes of the integer types we quantize to, with their ranges; the 4-bit
# and 2-bit ones are computed like the others and handed out as host arrays (onnx/_lowp.py)
_UINT8, _INT8, _UINT16, _INT16 = 2, 3, 4, 5
_RANGES = {_UINT8: (0, 255), _INT8: (-128, 127), _UINT16: (0, 65535), _INT16: (-32768, 32767),
           21: (0, 15), 22: (-8, 7), 25: (0, 3), 26: (-2, 1)}
# low-precision float types QuantizeLinear rounds to (float8 but E8M0, float6, float4)
_FLOATS = frozenset((17, 18, 19, 20, 23, 27, 28))
_FLOAT8 = _lowp.FLOAT8
# types whose zero point DequantizeLinear does not subtract (a float8 one must be zero)
_NO_ZERO_POINT = _FLOAT8 | {23}


def _type_name(code: int) -> str:
    import onnx

    if code in onnx.TensorProto.DataType.values():
        return onnx.TensorProto.DataType.Name(code)
    return str(code)


def _check_quant_type(node, code: int, what: str, low_precision: bool = True) -> int:
    """code if it is a type we quantize to (with low_precision=False, one of the 8-bit and
    16-bit integer types); a clear failure otherwise."""
    if code in _RANGES and (low_precision or code not in _lowp.LOW_PRECISION) or \
            low_precision and code in _FLOATS:
        return code
    kinds = "uint8, int8, uint16, int16"
    if low_precision:
        kinds += ", uint4, int4, uint2, int2, float8 (but E8M0), float6, float4"
    raise node.fail(f"{what} element type {_type_name(code)} is not a quantized type ({kinds})")


def _value_type(node, v, i: int) -> int:
    """The ONNX element type of input i: a host array's own, else the declared one."""
    if isinstance(v, LowPrecisionArray):
        return v.code
    return node.input_type(i) if v is not None else 0


def _as_tensor(node, v):
    """A host array input as a tensor (float32 or int64, exact); tensors as they are."""
    return _lowp.to_tensor(v, node.device) if isinstance(v, LowPrecisionArray) else v


def _out_type(node, zp_index: int, default: int) -> int:
    """The quantized type of a node's output: its zero point's declared type, else the type
    declared for the output itself, else default."""
    code = node.input_type(zp_index)
    if not code and node.outputs:
        code = node.graph.types.get(node.outputs[0], 0)
    return code or default


def _saturate(y, code: int):
    """Rounded float values y clamped to the range of ONNX type code, held as int64."""
    lo, hi = _RANGES[code]
    return y.clamp(lo, hi).to(_dt.int64)


def _per_axis(node, v, x, axis: int, block: int, what: str):
    """Scale or zero point v made broadcastable to x: scalar, per-axis (1-D) or blocked."""
    if v.numel() == 1:
        return v.reshape(())
    r = x.ndim
    if not -r <= axis < r:
        raise node.fail(f"axis {axis} is out of range for input of shape {x.shape}")
    axis %= r
    n = x.shape[axis]
    if not block:
        if v.ndim != 1 or v.shape[0] != n:
            raise node.fail(f"{what} of shape {v.shape} must be a scalar or 1-D of length {n} "
                            f"(axis {axis} of input {x.shape})")
        return v.reshape(*[n if d == axis else 1 for d in range(r)])
    if block < 0:
        raise node.fail(f"block_size {block} must be positive")
    want = tuple(-(-n // block) if d == axis else x.shape[d] for d in range(r))
    if tuple(v.shape) != want:
        raise node.fail(f"{what} of shape {v.shape} does not block input {x.shape} along axis "
                        f"{axis} with block_size {block} (expected {want})")
    idx = node.const(np.arange(n, dtype=np.int64) // block)
    return v.index_select(axis, idx)


def _compute_dtype(a, b):
    """The float dtype numpy would divide or multiply a by b in (integers count as float64)."""
    if a.dtype is b.dtype and a.dtype.is_floating_point:
        return a.dtype
    if _dt.float64 in (a.dtype, b.dtype) or not a.dtype.is_floating_point:
        return _dt.float64
    return _dt.float32


@handler("QuantizeLinear")
def quantize_linear(node, inputs, attrs):
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        raise node.fail("expects inputs x and y_scale")
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    for name, v in (("x", x), ("y_scale", scale)):
        if isinstance(v, LowPrecisionArray):
            raise node.fail(f"{name} has element type {v.type_name}; it must be a float or "
                            "int32 tensor")
    wanted = attrs.get("output_dtype", 0)
    zt = _value_type(node, zp, 2)
    if wanted and zt and wanted != zt:
        raise node.fail(f"output_dtype {_type_name(wanted)} does not match y_zero_point type "
                        f"{_type_name(zt)}")
    code = _check_quant_type(node, zt or wanted or _out_type(node, 2, _UINT8), "output")
    saturate = attrs.get("saturate", 1)
    if saturate not in (0, 1):
        raise node.fail(f"attribute saturate must be 0 or 1, got {saturate}")
    zp = _as_tensor(node, zp)
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    s = _per_axis(node, scale, x, axis, block, "y_scale")
    precision = attrs.get("precision")
    work = st_dtype(precision, node.name) if precision else _compute_dtype(x, s)
    q = x.to(work) / s.to(work)
    if code in _FLOATS:
        # rounded to the type on the host, from the quotient in its own precision; the zero
        # point of a float8 type is zero by definition and is not added
        if zp is not None and code not in _FLOAT8:
            q = q + _per_axis(node, zp, x, axis, block, "y_zero_point").to(work)
        return LowPrecisionArray(
            _lowp.cast_array(_lowp.host_values(q), code, bool(saturate)), code)
    q = q.round().to(_dt.float64)  # round half to even, as ONNX says
    if zp is not None:
        q = q + _per_axis(node, zp, x, axis, block, "y_zero_point").to(_dt.float64)
    y = _saturate(q, code)
    return _lowp.from_tensor(y, code) if code in _lowp.LOW_PRECISION else y


@handler("DequantizeLinear")
def dequantize_linear(node, inputs, attrs):
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        raise node.fail("expects inputs x and x_scale")
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    if isinstance(scale, LowPrecisionArray):
        raise node.fail(f"x_scale has element type {scale.type_name}; it must be a float "
                        "tensor")
    xt = _value_type(node, x, 0)
    if xt:
        zt = _value_type(node, zp, 2)
        if zt and zt != xt and xt not in _NO_ZERO_POINT:
            raise node.fail(f"x type {_type_name(xt)} and x_zero_point type {_type_name(zt)} "
                            "differ")
    if isinstance(x, LowPrecisionArray):
        if x.code in _NO_ZERO_POINT:
            if zp is not None and x.code in _FLOAT8 and \
                    np.any(_lowp.host_values(zp).astype(np.float32) != 0):
                raise node.fail(f"x_zero_point must be zero for {x.type_name}")
            zp = None
        x, zp = _as_tensor(node, x), _as_tensor(node, zp)
    elif x.dtype.is_floating_point:
        raise node.fail(f"x must be an integer tensor, got {x.dtype}")
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    s = _per_axis(node, scale, x, axis, block, "x_scale")
    # the difference is taken in float32 (exact for every 16-bit value), as the reference does
    work = _dt.float64 if scale.dtype is _dt.float64 else _dt.float32
    d = x.to(work)
    if zp is not None:
        d = d - _per_axis(node, zp, x, axis, block, "x_zero_point").to(work)
    out = attrs.get("output_dtype")
    return (d * s.to(work)).to(st_dtype(out, node.name) if out else scale.dtype)


@handler("DynamicQuantizeLinear")
def dynamic_quantize_linear(node, inputs, attrs):
    x = inputs[0] if inputs else None
    if x is None or not x.dtype.is_floating_point:
        raise node.fail(f"expects a float input x, got {None if x is None else x.dtype}")
    zero = node.const(0.0, dtype=x.dtype)
    hi = where(amax(x) > 0, amax(x), zero)
    lo = where(amin(x) < 0, amin(x), zero)
    span = hi - lo
    # an all-zero input would give a zero scale: ONNX uses 1/255 there
    scale = where(span == 0, node.const(1.0, dtype=x.dtype), span) / 255.0
    zp = (zero - lo / scale).clamp(0, 255).round()
    y = ((x / scale).round() + zp).clamp(0, 255)
    return y.to(_dt.int64), scale, zp.to(_dt.int64)


def _quantized_operand(v, zp, row: bool):
    """A quantized operand minus its zero point, in float64 (exact for 16-bit products).

    A 1-D zero point of size > 1 is per row of a matrix (row=True) or per column.
    """
    f = v.to(_dt.float64)
    if zp is None:
        return f
    z = zp.to(_dt.float64)
    if z.numel() == 1:
        return f - z.reshape(())
    if z.ndim == 1 and row:
        return f - z.reshape(-1, 1)
    return f - z


def _requantize(acc, multiplier, y_zp, code):
    """Integer accumulators times the combined scale, plus the output zero point, saturated."""
    y = acc * multiplier.to(_dt.float64)
    if y_zp is not None:
        z = y_zp.to(_dt.float64)
        y = y + (z.reshape(()) if z.numel() == 1 else z)
    return _saturate(y.round(), code)


def _scales(node, names, values):
    for name, v in zip(names, values):
        if v is None:
            raise node.fail(f"input {name} is required")
        if not v.dtype.is_floating_point:
            raise node.fail(f"{name} must be a float tensor, got {v.dtype}")


def _row_scale(s, row: bool):
    if s.numel() == 1:
        return s.reshape(())
    return s.reshape(-1, 1) if row else s


@handler("QLinearMatMul")
def qlinear_matmul(node, inputs, attrs):
    ins = list(inputs) + [None] * (8 - len(inputs))
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = ins[:8]
    if a is None or b is None:
        raise node.fail("expects inputs a and b")
    _scales(node, ("a_scale", "b_scale", "y_scale"), (a_s, b_s, y_s))
    if a.ndim < 1 or b.ndim < 1 or a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise node.fail(f"a {a.shape} and b {b.shape} cannot be multiplied")
    code = _out_type(node, 7, node.input_type(0) or _UINT8)
    code = _check_quant_type(node, code, "output", low_precision=False)
    acc = _quantized_operand(a, a_zp, True).matmul(
        _quantized_operand(b, b_zp, False))
    if y_s.numel() != 1:
        raise node.fail(f"y_scale must be a scalar, got shape {y_s.shape}")
    # the combined scale is formed in the scales' own precision, as the reference does
    multiplier = _row_scale(a_s, True) * _row_scale(b_s, False) / y_s.reshape(())
    return _requantize(acc, multiplier, y_zp, code)


@handler("QLinearConv")
def qlinear_conv(node, inputs, attrs):
    from .ops_nn import conv

    ins = list(inputs) + [None] * (9 - len(inputs))
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, bias = ins[:9]
    if x is None or w is None:
        raise node.fail("expects inputs x and w")
    _scales(node, ("x_scale", "w_scale", "y_scale"), (x_s, w_s, y_s))
    if x_s.numel() != 1 or y_s.numel() != 1:
        raise node.fail(f"x_scale {x_s.shape} and y_scale {y_s.shape} must be scalars")
    if w.ndim < 3:
        raise node.fail(f"weight must be (M, C/group, k...), got {w.shape}")
    m = w.shape[0]
    chan = [m] + [1] * (w.ndim - 1)
    for name, v in (("w_scale", w_s), ("w_zero_point", w_zp)):
        if v is not None and v.numel() != 1 and (v.ndim != 1 or v.shape[0] != m):
            raise node.fail(f"{name} of shape {v.shape} must be a scalar or 1-D of length {m} "
                            "(one per output channel)")
    code = _out_type(node, 7, node.input_type(0) or _UINT8)
    code = _check_quant_type(node, code, "output", low_precision=False)
    xf = _quantized_operand(x, x_zp, False)
    wf = w.to(_dt.float64)
    if w_zp is not None:
        z = w_zp.to(_dt.float64)
        wf = wf - (z.reshape(()) if z.numel() == 1 else z.reshape(*chan))
    b = None if bias is None else bias.to(_dt.float64)
    acc = conv(node, [xf, wf, b], attrs)
    ws = w_s.reshape(()) if w_s.numel() == 1 else w_s.reshape(1, m, *([1] * (x.ndim - 2)))
    multiplier = x_s.reshape(()) * ws / y_s.reshape(())
    return _requantize(acc, multiplier, y_zp, code)
