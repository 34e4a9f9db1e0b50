"""ONNX import handlers for math: constants and casts, elementwise arithmetic, comparisons and
logic, activations, matrix products, softmax family, reductions, scans and TopK.

Every handler computes with our ops, so gradients flow through the imported node. Outputs keep
the input's element type (our integer reductions widen to int64 and our half-precision binary
ops compute in float32, ONNX keeps the type), which matters inside `_expanded` graphs where a
later CastLike or Where reads the type back.
"""

from __future__ import annotations

import math

import numpy as np

import singa_tensor as st

from ..tensor import Tensor
from . import _lowp
from ._graph import OnnxImportError, ints, st_dtype
from ._handlers import handler

F32_MAX = float(np.finfo(np.float32).max)


# ---- helpers -------------------------------------------------------------------------------------


def _like(y: Tensor, d) -> Tensor:
    """y in dtype d (our ops may widen; ONNX keeps the input type)."""
    return y if y.dtype is d else st.cast(y, d)


def _need(node, inputs, lo: int, hi: int | None = None) -> None:
    hi = lo if hi is None else hi
    given = len(inputs)
    if given < lo or given > hi or any(inputs[i] is None for i in range(lo)):
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise node.fail(f"expected {want} inputs, got {given}")


def _axis(node, axis: int, ndim: int, name: str = "axis") -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise node.fail(f"{name} {axis} is out of range for a rank-{ndim} input")
    return axis % max(ndim, 1)


def _dtype(node, code: int):
    try:
        return st_dtype(code, "cast")
    except OnnxImportError as e:
        raise node.fail(str(e).split(": ", 1)[-1]) from None


def _is_int(x: Tensor) -> bool:
    return not x.dtype.is_floating_point and x.dtype is not st.bool


def _const(node, arr: np.ndarray, dtype=None) -> Tensor:
    """node.const for an array, keeping a 0-d array 0-d."""
    t = node.const(np.asarray(arr))
    t = t if dtype is None else _like(t, dtype)
    return t if t.shape == arr.shape else t.reshape(*arr.shape)


def _scalar(node, inp, default: float) -> float:
    return default if inp is None else float(inp.cpu().numpy().reshape(-1)[0])


# ---- constants, identity, casts ------------------------------------------------------------------


@handler("Constant")
def constant(node, inputs, attrs):
    # made once per device: handlers never write to their inputs, so the tensor is reused
    memo = node.memo
    if memo is not None and memo[0] == node.device:
        return memo[1]
    out = _constant(node, attrs)
    node.memo = (node.device, out)
    return out


def _constant(node, attrs):
    if len(attrs) != 1:
        raise node.fail(f"expected exactly one value attribute, got {sorted(attrs)}")
    (key, v), = attrs.items()
    if key == "value":
        return _const(node, np.asarray(v))
    if key in ("value_float", "value_floats"):
        return _const(node, np.asarray(v, dtype=np.float32))
    if key in ("value_int", "value_ints"):
        return _const(node, np.asarray(v, dtype=np.int64))
    if key in ("value_string", "value_strings"):  # a host string value (ops_string.py)
        return node.const(np.asarray(v, dtype=object))
    raise node.fail(f"attribute {key!r} is not supported (sparse constants)")


@handler("Identity")
def identity(node, inputs, attrs):
    _need(node, inputs, 1)
    # a one-tuple, so that a sequence (a Python list) passes through as one value
    return (inputs[0],)


@handler("Cast")
def cast(node, inputs, attrs):
    _need(node, inputs, 1)
    if "to" not in attrs:
        raise node.fail("attribute 'to' is required")
    to, x = attrs["to"], inputs[0]
    if to in _lowp.LOW_PRECISION or isinstance(x, _lowp.LowPrecisionArray):
        return _lowp.cast(node, x, to, attrs, node.input_type(0))
    _lowp.cast_options(node, attrs)
    return _like(x, _dtype(node, to))


@handler("CastLike")
def cast_like(node, inputs, attrs):
    _need(node, inputs, 2)
    x, like = inputs
    if isinstance(like, _lowp.LowPrecisionArray):
        return _lowp.cast(node, x, like.code, attrs, node.input_type(0))
    if isinstance(x, _lowp.LowPrecisionArray):
        to = node.input_type(1) or _lowp.tensor_code(like)
        return _lowp.cast(node, x, to, attrs)
    _lowp.cast_options(node, attrs)
    return _like(x, like.dtype)


# ---- arithmetic ----------------------------------------------------------------------------------


def _binary_same_type(fn):
    def run(node, inputs, attrs):
        _need(node, inputs, 2)
        a, b = inputs
        return _like(fn(a, b), a.dtype)

    return run


for _name, _fn in (("Add", st.add), ("Sub", st.sub), ("Mul", st.mul)):
    handler(_name)(_binary_same_type(_fn))


@handler("Div")
def div(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = inputs
    if _is_int(a):
        if st.ops.elementwise.any_zero(b):
            raise node.fail("integer division by zero")
        return _like(st.div(a, b, rounding_mode="trunc"), a.dtype)
    return _like(st.true_divide(a, b), a.dtype)


@handler("Pow")
def pow_(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = inputs
    if a.dtype.is_floating_point:
        return _like(st.pow(a, _like(b, a.dtype)), a.dtype)
    # an integer base: exact in float64 for the magnitudes an int64 result can hold
    y = st.pow(st.cast(a, st.float64), st.cast(b, st.float64))
    return st.cast(st.round(y) if not b.dtype.is_floating_point else y, a.dtype)


@handler("Mod")
def mod(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = inputs
    fmod = attrs.get("fmod", 0)
    if _is_int(a) and st.ops.elementwise.any_zero(b):
        raise node.fail("integer modulo by zero")
    if not fmod:
        if _is_int(a):
            return _like(st.remainder(a, b), a.dtype)
        return _like(_float_mod(a, b), a.dtype)
    if _is_int(a):
        return _like(a - st.div(a, b, rounding_mode="trunc") * b, a.dtype)
    r = _float_mod(a, b)
    # C fmod takes the dividend's sign: undo Python's shift toward the divisor's sign
    shifted = st.logical_and(st.ne(r, 0.0), st.ne(st.lt(r, 0.0), st.lt(a, 0.0)))
    return _like(st.where(shifted, r - b, r), a.dtype)


def _float_mod(a, b):
    """Python's modulo for floats with numpy's edge cases (x % inf keeps x where the signs
    agree and gives inf-signed results otherwise; x % 0 is nan)."""
    r = st.remainder(a, b)
    inf_b = st.isinf(b)
    if not bool(st.any(inf_b).item()):
        return r
    same = st.eq(st.lt(a, 0.0), st.lt(b, 0.0))
    keep = st.logical_or(same, st.eq(a, 0.0))
    return st.where(st.logical_and(inf_b, st.isfinite(a)), st.where(keep, a, b), r)


def _unary_same_type(fn):
    def run(node, inputs, attrs):
        _need(node, inputs, 1)
        return _like(fn(inputs[0]), inputs[0].dtype)

    return run


_UNARY = {
    "Neg": st.neg, "Abs": st.abs, "Reciprocal": st.reciprocal, "Sqrt": st.sqrt, "Exp": st.exp,
    "Log": st.log, "Ceil": st.ceil, "Floor": st.floor, "Round": st.round, "Sign": st.sign,
    "Erf": st.erf, "Sin": st.sin, "Cos": st.cos, "Tan": st.tan, "Sigmoid": st.sigmoid,
    "Tanh": st.tanh, "Relu": st.relu,
    "Sinh": lambda x: (st.exp(x) - st.exp(-x)) * 0.5,
    "Cosh": lambda x: (st.exp(x) + st.exp(-x)) * 0.5,
    # sign * log(|x| + ...) keeps large negative x from cancelling to log(0)
    "Asinh": lambda x: st.sign(x) * st.log(st.abs(x) + st.sqrt(x * x + 1.0)),
    "Acosh": lambda x: st.log(x + st.sqrt(x * x - 1.0)),
    "Atanh": lambda x: st.log((1.0 + x) / (1.0 - x)) * 0.5,
    "Softsign": lambda x: x / (st.abs(x) + 1.0),
    "Mish": lambda x: x * st.tanh(st.softplus(x)),
    "Softplus": lambda x: st.softplus(x),
}


def _atan(x: Tensor) -> Tensor:
    """arctan from sqrt and a short series: for |x| > 1 use pi/2 - atan(1/x); four halvings
    atan(t) = 2 atan(t / (1 + sqrt(1 + t^2))) bring |t| under 0.1, where nine odd terms are
    exact to double precision. Every step is differentiable."""
    big = st.gt(st.abs(x), 1.0)
    t = st.where(big, 1.0 / st.where(big, x, 1.0), x)
    for _ in range(4):
        t = t / (st.sqrt(t * t + 1.0) + 1.0)
    t2 = t * t
    s = t * 0.0
    for k in range(17, 0, -2):
        s = (1.0 / k) - t2 * s
    core = t * s * 16.0
    return st.where(big, st.sign(x) * (math.pi / 2) - core, core)


def _asin(x: Tensor) -> Tensor:
    # half-angle form: no division by zero at |x| = 1
    return _atan(x / (st.sqrt(1.0 - x * x) + 1.0)) * 2.0


_UNARY.update({"Atan": _atan, "Asin": _asin, "Acos": lambda x: (math.pi / 2) - _asin(x)})
for _name, _fn in _UNARY.items():
    handler(_name)(_unary_same_type(_fn))


# ---- comparisons, logic, bits --------------------------------------------------------------------


def _compare(fn):
    def run(node, inputs, attrs):
        _need(node, inputs, 2)
        a, b = inputs
        if a.dtype is not b.dtype:
            raise node.fail(f"input types differ: {a.dtype.name} and {b.dtype.name}")
        return fn(a, b)

    return run


for _name, _fn in (("Equal", st.eq), ("Less", st.lt), ("LessOrEqual", st.le),
                   ("Greater", st.gt), ("GreaterOrEqual", st.ge), ("And", st.logical_and),
                   ("Or", st.logical_or), ("Xor", st.logical_xor)):
    handler(_name)(_compare(_fn))


@handler("Not")
def not_(node, inputs, attrs):
    _need(node, inputs, 1)
    return st.logical_not(inputs[0])


def _int_only(node, *xs):
    for x in xs:
        if not _is_int(x):
            raise node.fail(f"expected integer inputs, got {x.dtype.name}")


def _bitwise(np_fn):
    # integer outputs carry no gradient, so a numpy round trip is exact and allowed here
    def run(node, inputs, attrs):
        n = 1 if np_fn is np.invert else 2
        _need(node, inputs, n)
        _int_only(node, *inputs)
        arrs = [x.cpu().numpy() for x in inputs]
        return _const(node, np.asarray(np_fn(*arrs)), inputs[0].dtype)

    return run


for _name, _fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                   ("BitwiseXor", np.bitwise_xor), ("BitwiseNot", np.invert)):
    handler(_name)(_bitwise(_fn))


@handler("BitShift")
def bit_shift(node, inputs, attrs):
    _need(node, inputs, 2)
    _int_only(node, *inputs)
    direction = attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise node.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    a, b = np.broadcast_arrays(*(x.cpu().numpy().astype(np.int64) for x in inputs))
    # a negative shift is out of range like one past the width: everything shifts out
    # (left: 0; right: the sign fill); int64 shifts past 63 are undefined in C, so clamp them
    out = (b < 0) | (b > 63)
    b = np.where(out, 0, b)
    if direction == "LEFT":
        y = np.where(out, 0, np.left_shift(a, b))
    else:
        y = np.where(out, np.where(a < 0, -1, 0), np.right_shift(a, b))
    return _const(node, y.astype(np.int64), inputs[0].dtype)


# ---- variadic ------------------------------------------------------------------------------------


def _variadic(fn, mean: bool = False):
    def run(node, inputs, attrs):
        if not inputs or any(x is None for x in inputs):
            raise node.fail(f"expected at least one input, got {len(inputs)}")
        y = inputs[0]
        for x in inputs[1:]:
            y = fn(y, x)
        if mean:
            y = y / float(len(inputs))
        return _like(y, inputs[0].dtype)

    return run


handler("Max")(_variadic(st.maximum))
handler("Min")(_variadic(st.minimum))
handler("Sum")(_variadic(st.add))
handler("Mean")(_variadic(st.add, mean=True))


# ---- activations ---------------------------------------------------------------------------------


@handler("Clip")
def clip(node, inputs, attrs):
    _need(node, inputs, 1, 3)
    x = inputs[0]
    if node.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
        lo = None if lo is None else node.const(lo, dtype=x.dtype)
        hi = None if hi is None else node.const(hi, dtype=x.dtype)
    else:
        lo = inputs[1] if len(inputs) > 1 else None
        hi = inputs[2] if len(inputs) > 2 else None
    # max then min: where min > max ONNX (like numpy.clip) returns max
    y = x
    if lo is not None:
        y = st.maximum(y, _like(lo, x.dtype))
    if hi is not None:
        y = st.minimum(y, _like(hi, x.dtype))
    return _like(y, x.dtype)


def _activation(fn, **defaults):
    def run(node, inputs, attrs):
        _need(node, inputs, 1)
        unknown = set(attrs) - set(defaults)
        if unknown:
            raise node.fail(f"unknown attributes {sorted(unknown)}")
        vals = {k: float(attrs.get(k, v)) if not isinstance(v, str) else attrs.get(k, v)
                for k, v in defaults.items()}
        x = inputs[0]
        return _like(fn(x, **vals), x.dtype)

    return run


def _hard_sigmoid(x, alpha, beta):
    return st.clamp(x * alpha + beta, 0.0, 1.0)


def _shrink(x, lambd, bias):
    return st.where(st.lt(x, -lambd), x + bias, st.where(st.gt(x, lambd), x - bias, x * 0))


_SELU_A, _SELU_G = 1.67326319217681884765625, 1.05070102214813232421875
_ACTIVATIONS = {
    "LeakyRelu": (lambda x, alpha: st.leaky_relu(x, alpha), {"alpha": 0.01}),
    "Elu": (lambda x, alpha: st.elu(x, alpha), {"alpha": 1.0}),
    "Selu": (lambda x, alpha, gamma: st.elu(x, alpha) * gamma,
             {"alpha": _SELU_A, "gamma": _SELU_G}),
    "Celu": (lambda x, alpha: st.elu(x / alpha, 1.0) * alpha, {"alpha": 1.0}),
    "ThresholdedRelu": (lambda x, alpha: st.where(st.gt(x, alpha), x, x * 0.0),
                        {"alpha": 1.0}),
    "HardSigmoid": (_hard_sigmoid, {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": (lambda x: x * _hard_sigmoid(x, 1.0 / 6.0, 0.5), {}),
    "Swish": (lambda x, alpha: x * st.sigmoid(x * alpha), {"alpha": 1.0}),
    "Shrink": (_shrink, {"lambd": 0.5, "bias": 0.0}),
    "Gelu": (lambda x, approximate: st.gelu(x, approximate), {"approximate": "none"}),
}
for _name, (_fn, _defaults) in _ACTIVATIONS.items():
    handler(_name)(_activation(_fn, **_defaults))


@handler("PRelu")
def prelu(node, inputs, attrs):
    _need(node, inputs, 2)
    x, slope = inputs
    if node.opset < 7 and slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1] > 1:
        # before opset 7 a 1-D slope of length C was per channel (dim 1), not right-aligned
        slope = slope.reshape((slope.shape[0],) + (1,) * (x.ndim - 2))
    return _like(st.where(st.lt(x, 0), x * _like(slope, x.dtype), x), x.dtype)


@handler("IsNaN")
def is_nan(node, inputs, attrs):
    _need(node, inputs, 1)
    return st.isnan(inputs[0])


@handler("IsInf")
def is_inf(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    y = st.isinf(x)
    if not attrs.get("detect_positive", 1):
        y = st.logical_and(y, st.lt(x, 0))
    if not attrs.get("detect_negative", 1):
        y = st.logical_and(y, st.gt(x, 0))
    return y


@handler("Where")
def where(node, inputs, attrs):
    _need(node, inputs, 3)
    c, a, b = inputs
    if c.dtype is not st.bool:
        raise node.fail(f"condition must be bool, got {c.dtype.name}")
    return _like(st.where(c, a, b), a.dtype)


# ---- matrix products -----------------------------------------------------------------------------


@handler("MatMul")
def matmul(node, inputs, attrs):
    _need(node, inputs, 2)
    a, b = inputs
    if a.ndim == 0 or b.ndim == 0:
        raise node.fail(f"inputs must have rank >= 1, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else -1]:
        raise node.fail(f"shapes {a.shape} and {b.shape} cannot be multiplied")
    return _like(st.matmul(a, b), a.dtype)


@handler("Gemm")
def gemm(node, inputs, attrs):
    _need(node, inputs, 2, 3)
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if a.ndim != 2 or b.ndim != 2:
        raise node.fail(f"A and B must be 2-D, got shapes {a.shape} and {b.shape}")
    if attrs.get("transA", 0):
        a = st.transpose(a, 0, 1)
    if attrs.get("transB", 0):
        b = st.transpose(b, 0, 1)
    if a.shape[1] != b.shape[0]:
        raise node.fail(f"inner dimensions differ: {a.shape} @ {b.shape}")
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    y = st.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return _like(y, inputs[0].dtype)


@handler("Einsum")
def einsum(node, inputs, attrs):
    eq = attrs.get("equation")
    if not isinstance(eq, str) or not inputs:
        raise node.fail("an 'equation' attribute and at least one input are required")
    d = inputs[0].dtype
    half = d in (st.float16, st.bfloat16)
    ops = [st.cast(x, st.float32) if half else x for x in inputs]
    try:
        y = st.einsum(eq.replace(" ", ""), *ops)
    except (ValueError, TypeError, IndexError) as e:
        raise node.fail(str(e)) from None
    return _like(y, d)


@handler("Det")
def det(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise node.fail(f"expected (..., n, n) matrices, got shape {x.shape}")
    return _like(_det(node, x), x.dtype)


def _det(node, x: Tensor) -> Tensor:
    """Gaussian elimination with partial pivoting, batched. Pivot choice is a discrete decision
    (read on the host); the elimination itself is Tensor ops, so the result is differentiable."""
    n, batch = x.shape[-1], x.shape[:-2]
    a = x.reshape(-1, n, n)
    if x.dtype not in (st.float32, st.float64):
        a = st.cast(a, st.float32)
    nb = a.shape[0]
    sign = np.ones(nb)
    diag = []
    for k in range(n):
        col = np.abs(a[:, k:, k].detach().cpu().numpy())
        piv = col.argmax(axis=1) + k if nb else np.zeros(0, np.int64)
        if (piv != k).any():
            perm = np.tile(np.arange(n), (nb, 1))
            perm[np.arange(nb), k], perm[np.arange(nb), piv] = piv, k
            sign[piv != k] *= -1
            idx = node.const(np.ascontiguousarray(
                np.broadcast_to(perm[:, :, None], (nb, n, n)).astype(np.int64)))
            a = st.gather(a, 1, idx)
        p = a[:, k, k]
        diag.append(p)
        if k + 1 < n:
            safe = st.where(st.eq(p, 0.0), 1.0, p)
            f = a[:, k + 1:, k] / safe.reshape(nb, 1)
            rest = a[:, k + 1:, :] - f.reshape(nb, n - k - 1, 1) * a[:, k:k + 1, :]
            a = st.cat([a[:, :k + 1, :], rest], dim=1)
    out = st.prod(st.stack(diag, dim=1), dim=1) if n else st.ones(nb, device=node.device)
    out = out * node.const(sign.astype(np.float32 if out.dtype is st.float32 else np.float64))
    return out.reshape(*batch) if batch else out.reshape(())


# ---- softmax family ------------------------------------------------------------------------------


def _along_axis(node, x, attrs, fn):
    """Run fn(x2d_or_x, axis): before opset 13 the input is coerced to 2-D at axis."""
    if node.opset < 13:
        axis = _axis(node, attrs.get("axis", 1), x.ndim)
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return fn(x.reshape(rows, -1) if x.numel() else x.reshape(rows, 0), 1).reshape(*x.shape)
    axis = _axis(node, attrs.get("axis", -1), x.ndim)
    return fn(x, axis)


def _softmax_op(fn):
    def run(node, inputs, attrs):
        _need(node, inputs, 1)
        x = inputs[0]
        return _like(_along_axis(node, x, attrs, lambda t, d: fn(t, d)), x.dtype)

    return run


handler("Softmax")(_softmax_op(st.softmax))
handler("LogSoftmax")(_softmax_op(st.log_softmax))


@handler("Hardmax")
def hardmax(node, inputs, attrs):
    _need(node, inputs, 1)
    x = inputs[0]

    def one_hot(t, d):
        idx = st.argmax(t, dim=d, keepdim=True)
        shape = [1] * t.ndim
        shape[d] = t.shape[d]
        pos = st.arange(t.shape[d], device=node.device).reshape(*shape)
        return st.cast(st.eq(pos, idx), x.dtype)

    return _along_axis(node, x, attrs, one_hot)


# ---- reductions ----------------------------------------------------------------------------------


def _sum(x, dims, keep):
    return st.sum(x, dim=dims, keepdim=keep)


def _logsumexp(x, dims, keep):
    return st.logsumexp(x, dim=dims, keepdim=keep)


# name -> (elementwise part, reduction, finishing part, value of an empty reduction)
_REDUCE = {
    "ReduceSum": (None, _sum, None, 0.0),
    "ReduceMean": (None, lambda x, d, k: st.mean(x, dim=d, keepdim=k), None, math.nan),
    "ReduceMax": (None, lambda x, d, k: st.amax(x, dim=d, keepdim=k), None, -math.inf),
    "ReduceMin": (None, lambda x, d, k: st.amin(x, dim=d, keepdim=k), None, math.inf),
    "ReduceProd": (None, lambda x, d, k: st.prod(x, dim=d, keepdim=k), None, 1.0),
    "ReduceL1": (st.abs, _sum, None, 0.0),
    "ReduceL2": (lambda x: x * x, _sum, st.sqrt, 0.0),
    "ReduceSumSquare": (lambda x: x * x, _sum, None, 0.0),
    "ReduceLogSum": (None, _sum, st.log, -math.inf),
    "ReduceLogSumExp": (None, _logsumexp, None, -math.inf),
}


def _reduce_axes(node, inputs, attrs, op: str):
    """The axes to reduce (None: all) per opset; () when noop_with_empty_axes asks for none."""
    moved = node.opset >= (13 if op == "ReduceSum" else 18)
    if moved:
        if "axes" in attrs:
            raise node.fail(f"axes is an input since opset {13 if op == 'ReduceSum' else 18}")
        axes = ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
    else:
        axes = attrs.get("axes")
    if not axes:
        return () if attrs.get("noop_with_empty_axes", 0) else None
    x = inputs[0]
    dims = [_axis(node, a, x.ndim, "axes entry") for a in axes]
    if len(set(dims)) != len(dims):
        raise node.fail(f"axes {axes} repeat a dimension")
    return tuple(sorted(dims))


def _reducer(op: str):
    pre, red, post, empty = _REDUCE[op]

    def run(node, inputs, attrs):
        _need(node, inputs, 1, 2)
        x = inputs[0]
        dims = _reduce_axes(node, inputs, attrs, op)
        keep = bool(attrs.get("keepdims", 1))
        if dims is None:
            dims = tuple(range(x.ndim))
        y = pre(x) if pre is not None else x
        if op == "ReduceLogSumExp" and not dims:
            return _like(st.log(st.exp(x)), x.dtype)
        if dims:
            if any(x.shape[d] == 0 for d in dims):
                shape = [1 if d in dims else s for d, s in enumerate(x.shape)
                         if keep or d not in dims]
                return _empty_reduction(node, x, tuple(shape), empty)
            y = red(y, dims, keep)
        if post is not None:
            y = post(y)
        return _like(y, x.dtype)

    return run


def _empty_reduction(node, x, shape, value):
    if x.dtype is st.bool:
        value = value > 0 if value != 0 else False
    elif not x.dtype.is_floating_point and not math.isfinite(value):
        info = np.iinfo(np.int64 if x.dtype is st.int64 else np.int32)
        value = int(info.max if value > 0 else info.min)
    return st.full(shape, value, dtype=x.dtype, device=node.device)


for _op in _REDUCE:
    handler(_op)(_reducer(_op))


def _arg_reduce(fn):
    def run(node, inputs, attrs):
        _need(node, inputs, 1)
        x = inputs[0]
        axis = _axis(node, attrs.get("axis", 0), x.ndim)
        keep = bool(attrs.get("keepdims", 1))
        if x.shape and x.shape[axis] == 0:
            raise node.fail(f"cannot take an arg-extremum along empty axis {axis} of {x.shape}")
        if attrs.get("select_last_index", 0):
            i = fn(st.flip(x, axis), dim=axis, keepdim=keep)
            return (x.shape[axis] - 1) - i
        return fn(x, dim=axis, keepdim=keep)

    return run


handler("ArgMax")(_arg_reduce(st.argmax))
handler("ArgMin")(_arg_reduce(st.argmin))


# ---- scans, TopK, Size, Dropout ------------------------------------------------------------------


def _scan(fn, fill: float):
    def run(node, inputs, attrs):
        _need(node, inputs, 2)
        x, ax = inputs
        if ax.numel() != 1 or ax.dtype.is_floating_point:
            raise node.fail(f"axis must be one integer, got shape {ax.shape} of {ax.dtype.name}")
        axis = _axis(node, ints(ax)[0], x.ndim)
        if x.ndim == 0:
            return x
        y = st.flip(x, axis) if attrs.get("reverse", 0) else x
        y = fn(y, axis)
        if attrs.get("exclusive", 0) and x.shape[axis]:
            # shift by one along axis, the identity entering first
            first = st.full(tuple(1 if d == axis else s for d, s in enumerate(y.shape)), fill,
                            dtype=y.dtype, device=node.device)
            y = st.cat([first, st.narrow(y, axis, 0, x.shape[axis] - 1)], dim=axis)
        if attrs.get("reverse", 0):
            y = st.flip(y, axis)
        return _like(y, x.dtype)

    return run


handler("CumSum")(_scan(st.cumsum, 0.0))
handler("CumProd")(_scan(st.cumprod, 1.0))


@handler("TopK")
def top_k(node, inputs, attrs):
    x = inputs[0] if inputs else None
    if node.opset < 10:
        _need(node, inputs, 1)
        if "k" not in attrs:
            raise node.fail("attribute 'k' is required before opset 10")
        k = int(attrs["k"])
    else:
        _need(node, inputs, 2)
        if inputs[1].numel() != 1:
            raise node.fail(f"k must hold one value, got shape {inputs[1].shape}")
        k = ints(inputs[1])[0]
    if x.ndim == 0:
        raise node.fail("input must have rank >= 1")
    axis = _axis(node, attrs.get("axis", -1), x.ndim)
    if not 0 <= k <= x.shape[axis]:
        raise node.fail(f"k = {k} is out of range for axis {axis} of size {x.shape[axis]}")
    # st.topk orders stably, the lower index first among ties, as ONNX asks; its values
    # carry the gradient. Always sorted, which sorted=0 (any order) allows.
    return tuple(st.topk(x, k, axis, largest=bool(attrs.get("largest", 1))))


@handler("Dropout")
def dropout(node, inputs, attrs):
    _need(node, inputs, 1, 3)
    x = inputs[0]
    if node.opset < 12:
        ratio = float(attrs.get("ratio", 0.5))
        training = node.opset < 7 and not attrs.get("is_test", 0)
    else:
        ratio = _scalar(node, inputs[1] if len(inputs) > 1 else None, 0.5)
        training = bool(_scalar(node, inputs[2] if len(inputs) > 2 else None, 0.0))
    if not 0.0 <= ratio < 1.0:
        raise node.fail(f"ratio must be in [0, 1), got {ratio}")
    if training and ratio > 0.0:
        keep = st.ge(st.rand(*x.shape, dtype=st.float32, device=node.device), ratio)
        y = _like(x * st.cast(keep, x.dtype) * (1.0 / (1.0 - ratio)), x.dtype)
    else:
        y = x
        keep = st.full(x.shape, True, dtype=st.bool, device=node.device) if node.wants(1) \
            else None
    if not node.wants(1):
        return y, None
    if node.opset < 10:
        keep = st.cast(keep, x.dtype)
    return y, keep
