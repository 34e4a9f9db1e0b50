"""Elementwise ops: unary math, broadcasting arithmetic, comparisons, logic and where.

Each op is one entry below: the kernel it runs, its backward in Tensor ops, its numpy
reference and its ONNX name.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _execution
from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor
from . import _fast
from . import _registry as _reg
from . import _special_np as _snp
from ._registry import (
    OpSpec,
    apply,
    bind_method,
    broadcast_shapes,
    broadcast_strides,
    check_same_device,
    contiguous,
    declare_methods,
    int64s,
    kernel,
    ptr,
    register,
    tensor_method,
)
from .layout import cast, sum_to

_fast_binary, _fast_unary = _fast.binary, _fast.unary

# the 16-bit floats: their kernels load each element into float, compute there and round once
_LOW = (_dt.float16, _dt.bfloat16)
_LOW_NAMES = ("float16", "bfloat16")
_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

# ---- unary ------------------------------------------------------------------------------------


def _run_unary(x: Tensor, op: str, alpha: float = 0.0, beta: float = 0.0) -> Tensor:
    h = _UNARY_FAST.get(op)
    if h is None:
        h = _UNARY_FAST[op] = _fast.handle("unary", op)
    out = _fast_unary(x, h, alpha, beta)
    if out is not None:
        return out
    xc = contiguous(x)
    out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
    kernel(x, op)(ptr(xc), ptr(out), out.numel(), alpha, beta)
    return out


_UNARY_FAST: dict = {}  # op -> its handle in the C fast path


def _unary_input(op: str, x, int_ok: bool):
    """Validate x and pick the dtype the kernel runs in; returns (x in that dtype, the dtype of
    the result to hand back)."""
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    d = x.dtype
    if d.is_floating_point:  # float16/bfloat16 kernels compute in float and round once
        return x, None
    if int_ok and d is not _dt.bool_:
        return x, None
    if int_ok:
        return cast(x, _dt.int64), None
    return cast(x, _dt.float32), None


def unary_op(name, onnx, backward, reference, *, domain=(-3.0, 3.0), int_ok=False, attrs=(),
             differentiable=True, twice=True, grad_domain=None, saves="xy", doc="",
             method=False, inplace=False):
    """Declare and register a unary op running kernel st_<name>_<dtype>(x, y, n, a, b) (one
    line of the ABI header's ST_UNARY_FLOAT_OPS list and one functor in functors.h); returns
    its public function.

    backward(ctx, g, x, y) is the input gradient in Tensor ops (None: not differentiable);
    reference the numpy definition. The dtype policy is the same for every unary op: each
    float dtype gives its own (float16 and bfloat16 load each element into float, compute
    there and round once), integers and bool go to float32 (or stay integers with int_ok).
    attrs: up to two (name, default) number arguments, passed to the kernel as alpha and beta.
    saves: which of the input "x" and output "y" the backward reads; saving only those lets
    users modify the other in place (y = x.sin(); y.add_(1) is fine, as in PyTorch); a
    function of the two attrs returning such a string picks them per call. method, inplace:
    the Tensor methods it provides (True for its own name, or the names).

    Example (elementwise.py declares exp so; st.exp is the function returned, with PyTorch's
    out= added by the package):
        >>> import singa_tensor as st
        >>> spec = st.op_registry["exp"]
        >>> spec.fn is st.exp.__wrapped__, spec.kind, spec.onnx, st.tensor([0.0]).exp().tolist()
        (True, 'unary', 'Exp', [1.0])
    """
    attr_names = tuple(a for a, _ in attrs)
    defaults = tuple(d for _, d in attrs)

    class Spec(OpSpec):
        pass

    Spec.__name__ = Spec.__qualname__ = "".join(p.title() for p in name.split("_"))
    Spec.name = name
    Spec.onnx = onnx
    Spec.kind = "unary"
    Spec.domain = domain
    Spec.grad_domain = grad_domain
    Spec.differentiable = differentiable
    Spec.twice_differentiable = twice
    Spec.dtypes = _LOW_NAMES + (("float32", "float64", "int32", "int64") if int_ok else
                                ("float32", "float64"))

    def forward(ctx, x, a=0.0, b=0.0):
        y = _run_unary(x, name, a, b)
        ctx.a, ctx.b = a, b
        keep = saves(a, b) if callable(saves) else saves
        ctx.save_for_backward(x if "x" in keep else None, y if "y" in keep else None)
        return y

    Spec.forward = staticmethod(forward)
    Spec.backward = staticmethod(lambda ctx, g: (backward(ctx, g, *ctx.saved_tensors),))
    Spec.reference = staticmethod(reference)

    def attr_values(args, kwargs) -> tuple:
        vals = list(defaults)
        if len(args) > len(vals):
            raise TypeError(f"{name}: takes at most {len(vals)} arguments after the input")
        for i, v in enumerate(args):
            vals[i] = v
        for k, v in kwargs.items():
            if k not in attr_names:
                raise TypeError(f"{name}: unexpected keyword argument {k!r}")
            vals[attr_names.index(k)] = v
        return _pack_attrs(name, vals)

    def fn(x, *args, **kwargs):
        a, b = attr_values(args, kwargs)
        x2, back = _unary_input(name, x, int_ok)
        y = apply(Spec, x2, a, b)
        return cast(y, back) if back is not None else y

    def in_place(x, args, kwargs) -> bool:
        """x.<name>_() computed straight into x's memory when no gradient is recorded: one
        kernel pass instead of a result and its copy back. False (nothing done) where the
        general in-place path is needed: x not contiguous or not floating point, an ONNX
        trace (which records ops, not kernels)."""
        if not (x._contig and x.dtype.is_floating_point):
            return False
        ex = _execution.running_count and _execution.current()
        if ex and ex.tracing:
            return False
        a, b = attr_values(args, kwargs)
        if x.numel():
            p = ptr(x)
            kernel(x, name)(p, p, x.numel(), a, b)
            x._storage.version += 1
        return True

    fn.in_place = in_place

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or (
        f"Elementwise {name}.\n\n    Example:\n        >>> import singa_tensor as st\n"
        f"        >>> st.op_registry[{name!r}].fn(st.tensor([0.5])).shape\n        (1,)\n"
    )
    Spec.fn = staticmethod(fn)
    register(Spec)
    return declare_methods(fn, name, method, inplace)


def _pack_attrs(op, vals):
    if not vals:
        return 0.0, 0.0
    for v in vals:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise TypeError(f"{op}: expected a number, got {v!r}")
    if len(vals) == 1:
        return float(vals[0]), 0.0
    return float(vals[0]), float(vals[1])


def _mask(x):  # 1 where x > 0 else 0, in x's dtype; not differentiable
    return relu_mask(x)


neg = unary_op("neg", "Neg", lambda c, g, x, y: -g, np.negative, int_ok=True, saves="",
               method=("neg", "__neg__"), inplace=True)
abs = unary_op("abs", "Abs", lambda c, g, x, y: g * sign(x), np.abs, int_ok=True,
               grad_domain=(0.1, 3.0), saves="x", method=("abs", "__abs__"), inplace=True)
sign = unary_op("sign", "Sign", lambda c, g, x, y: g * 0.0, np.sign, int_ok=True, saves="",
                method=True, inplace=True)
exp = unary_op("exp", "Exp", lambda c, g, x, y: g * y, np.exp, domain=(-10.0, 10.0), saves="y",
               method=True, inplace=True)
log = unary_op("log", "Log", lambda c, g, x, y: g / x, np.log, domain=(0.01, 10.0), saves="x",
               method=True, inplace=True)
log1p = unary_op("log1p", None, lambda c, g, x, y: g / (x + 1.0), np.log1p, domain=(-0.9, 10.0),
                 saves="x", method=True, inplace=True)
expm1 = unary_op("expm1", None, lambda c, g, x, y: g * (y + 1.0), np.expm1, saves="y",
                 method=True, inplace=True)
sqrt = unary_op("sqrt", "Sqrt", lambda c, g, x, y: g / (y * 2.0), np.sqrt, domain=(0.01, 10.0),
                saves="y", method=True, inplace=True)
rsqrt = unary_op("rsqrt", None, lambda c, g, x, y: g * (y * y * y) * -0.5,
                 lambda x: 1.0 / np.sqrt(x), domain=(0.1, 10.0), saves="y", method=True,
                 inplace=True)
sin = unary_op("sin", "Sin", lambda c, g, x, y: g * cos(x), np.sin, saves="x",
               method=True, inplace=True)
cos = unary_op("cos", "Cos", lambda c, g, x, y: g * -sin(x), np.cos, saves="x",
               method=True, inplace=True)
tan = unary_op("tan", "Tan", lambda c, g, x, y: g * (y * y + 1.0), np.tan, domain=(-1.2, 1.2),
               saves="y", method=True)
tanh = unary_op("tanh", "Tanh", lambda c, g, x, y: _tanh_backward(c, g, x, y), np.tanh,
                saves="y", method=True, inplace=True)
sigmoid = unary_op("sigmoid", "Sigmoid", lambda c, g, x, y: _sigmoid_backward(c, g, x, y),
                   lambda x: 1.0 / (1.0 + np.exp(-x)), domain=(-10.0, 10.0), saves="y",
                   method=True, inplace=True)
relu = unary_op("relu", "Relu", lambda c, g, x, y: _relu_backward(c, g, x, y),
                lambda x: np.maximum(x, 0), int_ok=True, grad_domain=(0.1, 3.0), saves="y",
                method=True, inplace=True)
relu_mask = unary_op("relu_mask", None, None, lambda x: (x > 0).astype(x.dtype),
                     differentiable=False)


def _sign_keeping(a, b):
    # with a slope (alpha) >= 0 the output is positive exactly where the input is, so the
    # backward reads only the output and an in-place call (F.leaky_relu(x, inplace=True)) keeps
    # its gradient; a negative slope needs the input, as in PyTorch
    return "y" if a >= 0.0 else "xy"


def _positive_part(x, y):  # 1 where the input was > 0, from whichever of x and y was saved
    return _mask(y if x is None else x)


leaky_relu = unary_op(
    "leaky_relu", "LeakyRelu",
    lambda c, g, x, y: g * (_positive_part(x, y) * (1.0 - c.a) + c.a),
    lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
    attrs=(("negative_slope", 0.01),), grad_domain=(0.1, 3.0), saves=_sign_keeping,
)
elu = unary_op(
    "elu", "Elu",
    lambda c, g, x, y: g * (_positive_part(x, y) * (1.0 - (y + c.a)) + (y + c.a)),
    lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
    attrs=(("alpha", 1.0),), grad_domain=(0.1, 3.0), saves=_sign_keeping,
)


def _run_unary_grad(x: Tensor, g: Tensor, op: str, alpha: float, beta: float) -> Tensor:
    """g * f'(x) by the one kernel st_<op>_backward_<dtype> (a functor of functors.h)."""
    if g.dtype is not x.dtype:
        g = cast(g, x.dtype)
    gc = contiguous(g)
    xc = contiguous(x)
    out = Tensor._empty(x._shape, x.dtype, x._device, x._be)
    kernel(x, op + "_backward")(ptr(xc), ptr(gc), ptr(out), out.numel(), alpha, beta)
    return out


def _fused_grad(op: str, composed, reads: str = "x"):
    """The backward of unary op `op`: its gradient kernel, or, when the gradient itself is to
    be differentiated (create_graph), `composed`, the same formula in Tensor ops. reads: which
    saved tensor the kernel's first operand is, the input "x" or the output "y"."""

    def backward(c, g, x, y):
        if _ag._mode.enabled:
            return composed(c, g, x, y)
        return _run_unary_grad(x if reads == "x" else y, g, op, c.a, c.b)

    return backward


# relu, sigmoid and tanh: one gradient kernel each (functors.h), the formula in Tensor ops
# under create_graph. relu's gradient reads the output, as PyTorch's does: it is positive (or
# NaN) exactly where the input is, so the input need not be kept. The kernel passes g where y
# is not <= 0, so a NaN input passes its gradient through, as in PyTorch
def _relu_grad(c, g, x, y):
    return g * _mask(y)


def _sigmoid_grad(c, g, x, y):
    return g * (y * (1.0 - y))


def _tanh_grad(c, g, x, y):
    return g * (1.0 - y * y)


_relu_backward = _fused_grad("relu", _relu_grad, reads="y")
_sigmoid_backward = _fused_grad("sigmoid", _sigmoid_grad, reads="y")
_tanh_backward = _fused_grad("tanh", _tanh_grad, reads="y")


def _gelu_grad(c, g, x, y):
    cdf = (erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5
    pdf = exp(x * x * -0.5) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _gelu_tanh_grad(c, g, x, y):
    inner = (x + x * x * x * 0.044715) * _SQRT_2_PI
    t = tanh(inner)
    d_inner = (x * x * (3 * 0.044715) + 1.0) * _SQRT_2_PI
    return g * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * d_inner)


def _erf_np(x):
    v = np.vectorize(math.erf, otypes=[np.float64])(x)
    return v.astype(x.dtype) if hasattr(x, "dtype") else v


gelu_exact = unary_op("gelu", "Gelu", _fused_grad("gelu", _gelu_grad),
                      lambda x: 0.5 * x * (1.0 + _erf_np(x / np.sqrt(2.0))), saves="x")
gelu_tanh = unary_op(
    "gelu_tanh", None, _fused_grad("gelu_tanh", _gelu_tanh_grad),
    lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    saves="x",
)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU activation: x * Phi(x), exactly (approximate="none") or with the tanh form.

    Example:
        >>> import singa_tensor as st
        >>> f"{st.gelu(st.tensor([1.0])).item():.4f}"
        '0.8413'
    """
    if approximate == "none":
        return gelu_exact(x)
    if approximate == "tanh":
        return gelu_tanh(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _silu_grad(c, g, x, y):
    s = sigmoid(x)
    return g * (s * (x * (1.0 - s) + 1.0))


silu = unary_op("silu", None, _fused_grad("silu", _silu_grad), lambda x: x / (1.0 + np.exp(-x)),
                domain=(-10.0, 10.0), saves="x")


def _softplus_grad(c, g, x, y):
    beta, threshold = c.a, c.b
    s = sigmoid(x * beta)
    return g * where(x * beta > threshold, 1.0, s)


softplus = unary_op(
    "softplus", "Softplus", _softplus_grad,
    lambda x, beta=1.0, threshold=20.0: np.where(
        x * beta > threshold, x, np.log1p(np.exp(np.minimum(x * beta, threshold))) / beta),
    attrs=(("beta", 1.0), ("threshold", 20.0)), domain=(-10.0, 10.0),
)
erf = unary_op("erf", "Erf", lambda c, g, x, y: g * exp(x * x * -1.0) * (2.0 / math.sqrt(math.pi)),
               _erf_np, saves="x", method=True, inplace=True)
floor = unary_op("floor", "Floor", lambda c, g, x, y: g * 0.0, np.floor, domain=(-5.0, 5.0),
                 saves="", method=True, inplace=True)
ceil = unary_op("ceil", "Ceil", lambda c, g, x, y: g * 0.0, np.ceil, domain=(-5.0, 5.0), saves="",
                method=True, inplace=True)
round = unary_op("round", "Round", lambda c, g, x, y: g * 0.0, np.round, domain=(-5.0, 5.0),
                 saves="", method=True, inplace=True)
reciprocal = unary_op("reciprocal", "Reciprocal", lambda c, g, x, y: g * (y * y) * -1.0,
                      lambda x: 1.0 / x, domain=(0.2, 5.0), saves="y", method=True, inplace=True)
square = unary_op("square", None, lambda c, g, x, y: g * x * 2.0, np.square, int_ok=True, saves="x",
                  method=True, inplace=True)
def _rsqrt_1mx2(x):  # 1 / sqrt(1 - x^2), the slope of asin
    return rsqrt(1.0 - x * x)


asin = unary_op("asin", "Asin", lambda c, g, x, y: g * _rsqrt_1mx2(x), np.arcsin,
                domain=(-1.0, 1.0), grad_domain=(-0.9, 0.9), saves="x",
                method=("asin", "arcsin"), inplace=("asin_", "arcsin_"))
acos = unary_op("acos", "Acos", lambda c, g, x, y: g * -_rsqrt_1mx2(x), np.arccos,
                domain=(-1.0, 1.0), grad_domain=(-0.9, 0.9), saves="x",
                method=("acos", "arccos"), inplace=("acos_", "arccos_"))
atan = unary_op("atan", "Atan", lambda c, g, x, y: g / (x * x + 1.0), np.arctan, saves="x",
                method=("atan", "arctan"), inplace=("atan_", "arctan_"))
asinh = unary_op("asinh", "Asinh", lambda c, g, x, y: g * rsqrt(x * x + 1.0), np.arcsinh,
                 saves="x", method=("asinh", "arcsinh"), inplace=("asinh_", "arcsinh_"))
acosh = unary_op("acosh", "Acosh", lambda c, g, x, y: g * rsqrt(x * x - 1.0), np.arccosh,
                 domain=(1.0, 5.0), grad_domain=(1.2, 3.0), saves="x",
                 method=("acosh", "arccosh"), inplace=("acosh_", "arccosh_"))
atanh = unary_op("atanh", "Atanh", lambda c, g, x, y: g / (1.0 - x * x), np.arctanh,
                 domain=(-1.0, 1.0), grad_domain=(-0.9, 0.9), saves="x",
                 method=("atanh", "arctanh"), inplace=("atanh_", "arctanh_"))
sinh = unary_op("sinh", "Sinh", lambda c, g, x, y: g * cosh(x), np.sinh, saves="x",
                method=True, inplace=True)
cosh = unary_op("cosh", "Cosh", lambda c, g, x, y: g * sinh(x), np.cosh, saves="x",
                method=True, inplace=True)
lgamma = unary_op("lgamma", None, lambda c, g, x, y: g * digamma(x), _snp.lgamma,
                  domain=(0.05, 6.0), grad_domain=(0.5, 3.0), saves="x", method=True,
                  inplace=True)
digamma = unary_op("digamma", None, lambda c, g, x, y: g * _polygamma(x, 1.0), _snp.digamma,
                   domain=(0.05, 6.0), grad_domain=(0.5, 3.0), saves="x", method=True,
                   inplace=True)
_polygamma = unary_op("polygamma", None, lambda c, g, x, y: g * _polygamma(x, c.a + 1.0),
                      _snp.polygamma, attrs=(("n", 1.0),), domain=(0.05, 6.0),
                      grad_domain=(0.5, 3.0), saves="x")
erfinv = unary_op("erfinv", None, lambda c, g, x, y: g * exp(y * y) * (math.sqrt(math.pi) / 2),
                  _snp.erfinv, domain=(-0.99, 0.99), grad_domain=(-0.9, 0.9), saves="y",
                  method=True, inplace=True)
erfc = unary_op("erfc", None,
                lambda c, g, x, y: g * exp(x * x * -1.0) * (-2.0 / math.sqrt(math.pi)),
                lambda x: 1.0 - _erf_np(x), saves="x", method=True, inplace=True)
log2 = unary_op("log2", None, lambda c, g, x, y: g / (x * math.log(2.0)), np.log2,
                domain=(0.01, 10.0), saves="x", method=True, inplace=True)
log10 = unary_op("log10", None, lambda c, g, x, y: g / (x * math.log(10.0)), np.log10,
                 domain=(0.01, 10.0), saves="x", method=True, inplace=True)
exp2 = unary_op("exp2", None, lambda c, g, x, y: g * y * math.log(2.0), np.exp2,
                domain=(-10.0, 10.0), saves="y", method=True, inplace=True)
trunc = unary_op("trunc", None, lambda c, g, x, y: g * 0.0, np.trunc, domain=(-5.0, 5.0),
                 saves="", method=("trunc", "fix"), inplace=("trunc_", "fix_"))
frac = unary_op("frac", None, lambda c, g, x, y: g, lambda x: x - np.trunc(x),
                domain=(-5.0, 5.0), grad_domain=(0.1, 0.9), saves="", method=True,
                inplace=True)
arcsin, arccos, arctan, arcsinh, arccosh, arctanh, fix = (asin, acos, atan, asinh, acosh, atanh,
                                                         trunc)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of digamma (n = 0 is digamma itself), elementwise.

    Below zero, n = 1 is exact through the reflection formula; other n sum the series up from x
    and give NaN below -1e6. At the poles (0 and the negative integers) the result is +inf
    for odd n and NaN for even n; at -inf it is NaN.

    Example:
        >>> import singa_tensor as st
        >>> [f"{v:.6f}" for v in st.polygamma(1, st.tensor([1.0, 2.0])).tolist()]
        ['1.644934', '0.644934']
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative integer, got {n!r}")
    if n > 1000:  # n! overflows float64 from n = 171 on; the kernel stops at 1000
        raise ValueError(f"polygamma: n must be at most 1000, got {n}")
    return _polygamma(input, float(n))


@tensor_method("polygamma", inplace="polygamma_")
def _polygamma_method(x: Tensor, n: int) -> Tensor:
    """x.polygamma(n): st.polygamma(n, x)."""
    return polygamma(n, x)


bind_method(sign, "sgn", inplace="sgn_")
sgn = sign


_pow_scalar = unary_op(
    "pow_scalar", None, lambda c, g, x, y: g * pow(x, c.a - 1.0) * c.a,
    lambda x, exponent=2.0: np.power(x, exponent).astype(x.dtype),
    attrs=(("exponent", 2.0),), domain=(0.1, 3.0),
)


def _clamp_grad(c, g, x, y):
    keep = logical_and(ge(x, c.a), le(x, c.b))
    return g * cast(keep, g.dtype)


_clamp = unary_op("clamp", "Clip", _clamp_grad,
                  lambda x, min=-1.0, max=1.0: np.clip(x, min, max),
                  int_ok=True, attrs=(("min", -1.0), ("max", 1.0)), grad_domain=(-0.9, 0.9))


@tensor_method("clamp", "clip", inplace=("clamp_", "clip_"))
def clamp(x: Tensor, min=None, max=None) -> Tensor:
    """Limit values to [min, max]; either bound may be None (tensor bounds broadcast).

    Example:
        >>> import singa_tensor as st
        >>> st.clamp(st.tensor([-2.0, 0.5, 3.0]), min=-1, max=1).tolist()
        [-1.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    if x.__class__ is Tensor and not x.dtype.is_floating_point:
        if isinstance(min, float) or isinstance(max, float):
            x = cast(x, _dt.float32)
        else:
            info = np.iinfo(np.int64)
            lo = info.min if min is None else min
            hi = info.max if max is None else max
            return _clamp(x, float(np.clip(lo, -2**62, 2**62)), float(np.clip(hi, -2**62, 2**62)))
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    return _clamp(x, lo, hi)


clip = clamp


@tensor_method()
def isnan(x: Tensor) -> Tensor:
    """Boolean mask of NaN elements.

    Example:
        >>> import singa_tensor as st
        >>> st.isnan(st.tensor([1.0, float('nan')])).tolist()
        [False, True]
    """
    return _float_test(x, "isnan")


@tensor_method()
def isinf(x: Tensor) -> Tensor:
    """Boolean mask of infinite elements."""
    return _float_test(x, "isinf")


@tensor_method()
def isfinite(x: Tensor) -> Tensor:
    """Boolean mask of finite elements."""
    return logical_not(logical_or(isnan(x), isinf(x)))


def _float_test(x, op):
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor")
    if not x.dtype.is_floating_point:
        from .. import creation

        return creation.zeros(x._shape, dtype=_dt.bool_, device=x.device)
    xc = contiguous(x)
    out = Tensor._empty(x._shape, _dt.bool_, x._device, x._be)
    kernel(x, op)(ptr(xc), ptr(out), out.numel())
    return out


# ---- binary -----------------------------------------------------------------------------------


def _scalar_tensor(value, dtype, like: Tensor) -> Tensor:
    from .. import creation

    return creation.scalar_tensor(value, dtype, like._device)


def _scalar_operand(op: str, value, dtype, like: Tensor) -> Tensor:
    """A number operand of op as a 0-d tensor of dtype; a clear error naming op where dtype
    cannot hold it (int32 + 2**40, an integer tensor and inf)."""
    try:
        return _scalar_tensor(value, dtype, like)
    except OverflowError:
        raise OverflowError(f"{op}: the number {value} does not fit in {dtype.name}") from None
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None


def _operands(op: str, a, b, float_only: bool = False):
    """Turn (a, b), tensors or Python scalars, into two tensors of one promoted dtype."""
    ta, tb = a.__class__ is Tensor, b.__class__ is Tensor
    if ta and tb:
        if a._device is not b._device and a._device != b._device:
            check_same_device(op, a, b)
        d = a.dtype if a.dtype is b.dtype else _dt.promote(a.dtype, b.dtype)
        # a 0-d tensor of another kind behaves like a scalar in promotion (PyTorch rule)
        if a.dtype is not b.dtype:
            if b.ndim == 0 and a.ndim > 0 and _kind(b.dtype) <= _kind(a.dtype):
                d = a.dtype
            elif a.ndim == 0 and b.ndim > 0 and _kind(a.dtype) <= _kind(b.dtype):
                d = b.dtype
    elif ta:
        if not isinstance(b, (int, float, bool)):
            b = _number(op, b)
        d = _dt.promote_scalar(a.dtype, b)
        b = _scalar_operand(op, b, d, a)
    elif tb:
        if not isinstance(a, (int, float, bool)):
            a = _number(op, a)
        d = _dt.promote_scalar(b.dtype, a)
        a = _scalar_operand(op, a, d, b)
    else:
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and "
                        f"{type(b).__name__}")
    if float_only and not d.is_floating_point:
        d = _dt.float32
    if a.dtype is not d:
        a = cast(a, d)
    if b.dtype is not d:
        b = cast(b, d)
    return a, b


def _kind(d) -> int:
    return 0 if d is _dt.bool_ else (2 if d.is_floating_point else 1)


def _number(op, v):
    """A numpy scalar operand (np.float32(2), a value of an array) as the Python number it holds,
    as PyTorch takes it; anything else is refused."""
    if isinstance(v, np.generic) and isinstance(v, (np.number, np.bool_)) and \
            not isinstance(v, np.complexfloating):
        return v.item()
    return _bad_operand(op, v)


def _bad_operand(op, v):
    raise TypeError(f"{op}: unsupported operand of type {type(v).__name__}")


def _run_binary(a: Tensor, b: Tensor, op: str, out_dtype=None) -> Tensor:
    sa, sb = a._shape, b._shape
    if sa == sb and a._contig and b._contig:
        out = Tensor._empty(sa, out_dtype or a.dtype, a._device, a._be)
        one = int64s(a, (1,))
        pa = a._storage.ptr + a._offset if a._offset else a._storage.ptr
        pb = b._storage.ptr + b._offset if b._offset else b._storage.ptr
        kernel(a, op)(pa, pb, out._storage.ptr, 1, int64s(a, (out._storage.nbytes //
                                                              out.dtype.itemsize,)), one, one)
        return out
    shape = sa if sa == sb else broadcast_shapes(sa, sb, op=op)
    out = Tensor._empty(shape, out_dtype or a.dtype, a._device, a._be)
    if not shape:
        shape_, stra, strb = (1,), (0,), (0,)
    else:
        shape_, stra, strb = shape, broadcast_strides(a, shape), broadcast_strides(b, shape)
    kernel(a, op)(ptr(a), ptr(b), ptr(out), len(shape_), int64s(a, shape_), int64s(a, stra),
                  int64s(a, strb))
    return out


@register
class ScaleHalf(OpSpec):
    """x * s for a float16/bfloat16 x and a Python number s, with s kept in float32 as
    PyTorch keeps it (mul and true division by a number: the number is not rounded to the
    16-bit format first; x / s runs as x * (1 / s))."""

    name = "_scale_half"
    dtypes = ("float16", "bfloat16")

    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        return _run_unary(x, "affine", s, -0.0)  # s * x + (-0.0): the product, bit for bit

    @staticmethod
    def backward(ctx, g):
        return (_scale_half(g, ctx.s) if g.dtype in _LOW else g * ctx.s), None

    @staticmethod
    def reference(x, s):
        return x * s

    @classmethod
    def onnx_export(cls, b, args, attrs, outs):
        x, s = args
        b.node("Mul", [b.value(x), b.scalar(s, x)], outputs=outs)


def _scale_half(x: Tensor, s: float) -> Tensor:
    return apply(ScaleHalf, x, s)


ScaleHalf.fn = staticmethod(_scale_half)


def _half_scale_operands(op: str, a, b):
    """(tensor, factor) when op (mul or div) has a float16/bfloat16 tensor and a Python number
    that PyTorch applies in float32; None otherwise."""
    if a.__class__ is Tensor and b.__class__ in (int, float) and a.dtype in _LOW:
        if op == "mul":
            return a, float(b)
        if b != 0 and math.isfinite(b):
            return a, 1.0 / float(b)
        return None
    if op == "mul" and b.__class__ is Tensor and a.__class__ in (int, float) and b.dtype in _LOW:
        return b, float(a)
    return None


# two bool operands: add and maximum are logical or, mul and minimum logical and (PyTorch's
# results); sub is refused, as PyTorch refuses it
_BOOL_FORMS = ("add", "maximum", "mul", "minimum", "sub")


def _bool_binary(name: str, a: Tensor, b: Tensor) -> Tensor:
    if name == "sub":
        raise TypeError("sub: subtracting bool tensors is not supported; use logical_xor() or "
                        "the ^ operator")
    return (logical_or if name in ("add", "maximum") else logical_and)(a, b)


def _pair(c, grad_a, grad_b) -> tuple:
    """The two input gradients of a binary op, each computed only if its input needs one
    (x * c and x / c with a constant c leave c's gradient, one or more whole-tensor ops,
    undone)."""
    need = c.needs_input_grad
    return (grad_a() if need[0] else None, grad_b() if len(need) > 1 and need[1] else None)


def binary_op(name, onnx, backward, reference, *, float_only=False, out_bool=False,
              differentiable=True, domain=(-3.0, 3.0), b_domain=None, dtypes=None,
              grad_domain=None, doc="", saves="abo", method=False, reflected=(),
              inplace=False, alpha=False):
    """Declare and register a broadcasting binary op running kernel st_<name>_<dtype> (one line
    of the ABI header's binary list and one functor); returns its public function.

    backward(ctx, g, a, b, out) returns the two gradients before broadcasting is undone (the
    helper sums them back to each input's shape); reference is the numpy definition. Operands
    are promoted as in PyTorch (a Python number takes the tensor's dtype). method, inplace,
    reflected: the Tensor methods and operators it provides. alpha: the function and its
    methods take PyTorch's `alpha=` (b is scaled by it first: add and sub)."""
    class Spec(OpSpec):
        pass

    Spec.__name__ = Spec.__qualname__ = "".join(p.title() for p in name.split("_"))
    Spec.name = name
    Spec.onnx = onnx
    Spec.kind = "binary"
    Spec.domain = domain
    Spec.b_domain = b_domain
    Spec.grad_domain = grad_domain
    Spec.differentiable = differentiable and not out_bool
    Spec.dtypes = dtypes or (_LOW_NAMES + ("float32", "float64") if float_only else
                             _LOW_NAMES + ("float32", "float64", "int32", "int64"))
    kernel_name = name
    if backward is None:
        saves = ""

    def keep(ctx, a, b, out):
        if saves:
            ctx.save_for_backward(a if "a" in saves else None, b if "b" in saves else None,
                                  out if "o" in saves else None)
            ctx.in_shapes = (a._shape, b._shape)
        else:
            ctx.shapes = (a._shape, b._shape)

    def forward(ctx, a, b):
        out = _run_binary(a, b, kernel_name, _dt.bool_ if out_bool else None)
        keep(ctx, a, b, out)
        return out

    Spec.forward = staticmethod(forward)
    if backward is not None:
        def bw(ctx, g):
            if saves:
                a, b, out = ctx.saved_tensors
                sa, sb = ctx.in_shapes
            else:
                a = b = out = None
                sa, sb = ctx.shapes
            ga, gb = backward(ctx, g, a, b, out)
            need = ctx.needs_input_grad
            return (sum_to(ga, sa) if ga is not None and need[0] else None,
                    sum_to(gb, sb) if gb is not None and need[1] else None)

        Spec.backward = staticmethod(bw)
    Spec.reference = staticmethod(reference)

    fast_dtypes = _LOW + ((_dt.float32, _dt.float64) if float_only else (
        _dt.float32, _dt.float64, _dt.int32, _dt.int64))

    fast = -1 if out_bool else _fast.handle("binary", kernel_name, fast_dtypes)
    recorded = Spec.differentiable

    def _record(spec, a, b, out):
        ctx = spec.node_class()
        keep(ctx, a, b, out)
        _ag.record(spec, ctx, (a, b), out)

    def fn(a, b):
        # plain calls (contiguous CPU tensors of one dtype and shape, or such a tensor and a
        # Python number) run in C
        out = _fast_binary(a, b, fast)
        if out is not None:
            if recorded and _ag._mode.enabled:
                if a.__class__ is not Tensor:  # the number as the 0-d tensor the graph keeps
                    if b.requires_grad:
                        _record(Spec, _scalar_tensor(a, out.dtype, b), b, out)
                elif b.__class__ is not Tensor:
                    if a.requires_grad:
                        _record(Spec, a, _scalar_tensor(b, out.dtype, a), out)
                elif a.requires_grad or b.requires_grad:
                    _record(Spec, a, b, out)
            return out
        # the next most common case, two tensors of one computable dtype on one device, skips
        # the promotion logic and the generic apply()
        if (a.__class__ is Tensor and b.__class__ is Tensor and a.dtype is b.dtype
                and a._device is b._device and a.dtype in fast_dtypes
                and not _execution.running_count):
            ctx = Spec.node_class()
            out = forward(ctx, a, b)
            if _ag._mode.enabled and (a.requires_grad or b.requires_grad) and Spec.differentiable:
                _ag.record(Spec, ctx, (a, b), out)
            return out
        if half_scalar:
            pair = _half_scale_operands(name, a, b)
            if pair is not None:
                return _scale_half(*pair)
        a, b = _operands(name, a, b, float_only)
        if a.dtype is _dt.bool_ and name in _BOOL_FORMS:
            return _bool_binary(name, a, b)
        return apply(Spec, a, b)

    half_scalar = name in ("mul", "div")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or (
        f"Elementwise {name} with numpy broadcasting.\n\n    Example:\n"
        f"        >>> import singa_tensor as st\n"
        f"        >>> st.{name}(st.tensor([1.0, 2.0]), st.tensor([2.0])).shape\n"
        f"        (2,)\n"
    )
    Spec.fn = staticmethod(fn)
    register(Spec)
    if not alpha:
        return declare_methods(fn, name, method, inplace, reflected, "inplace_binary")
    plain = fn

    def fn(a, b, *, alpha=1) -> Tensor:
        if alpha != 1:
            b = _alpha_scaled(name, a, b, alpha)
        return plain(a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = plain.__doc__
    # the operators (and the in-place forms, which take alpha themselves) call the op
    # directly: alpha= is for the function and the named methods
    names = (method,) if isinstance(method, str) else tuple(method)
    declare_methods(plain, name, tuple(m for m in names if m.startswith("__")), inplace,
                    reflected, "inplace_binary")
    return declare_methods(fn, name, tuple(m for m in names if not m.startswith("__")))


def _alpha_scaled(name: str, a, b, alpha):
    """alpha * b for add/sub's alpha=, with PyTorch's check on integer operands."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"{name}(): alpha must be a number, got {type(alpha).__name__}")
    ints = [x.dtype.is_floating_point is False for x in (a, b) if isinstance(x, Tensor)]
    if isinstance(alpha, float) and ints and all(ints) and not any(
            isinstance(x, float) for x in (a, b)):
        raise RuntimeError(f"{name}(): for integral input tensors, argument alpha must not be a "
                           f"floating point number")
    return b * alpha


add = binary_op("add", "Add", lambda c, g, a, b, o: (g, g), np.add, saves="",
                doc="a + alpha * b with broadcasting (alpha defaults to 1).\n\n    Example:\n"
                    "        >>> import singa_tensor as st\n"
                    "        >>> st.add(st.tensor([1, 2]), 10).tolist()\n        [11, 12]\n"
                    "        >>> st.add(st.tensor([1.0, 2.0]), st.ones(2), alpha=0.5).tolist()\n"
                    "        [1.5, 2.5]\n",
                method=("add", "__add__"), reflected="__radd__",
                inplace=("add_", "__iadd__"), alpha=True)
sub = binary_op("sub", "Sub", lambda c, g, a, b, o: _pair(c, lambda: g, lambda: -g), np.subtract,
                saves="",
                doc="a - alpha * b with broadcasting (alpha defaults to 1).\n\n    Example:\n"
                    "        >>> import singa_tensor as st\n"
                    "        >>> st.sub(st.tensor([5, 7]), st.tensor([1, 2]), alpha=2).tolist()\n"
                    "        [3, 3]\n",
                method=("sub", "subtract", "__sub__"),
                reflected="__rsub__", inplace=("sub_", "__isub__"), alpha=True)
mul = binary_op("mul", "Mul", lambda c, g, a, b, o: _pair(c, lambda: g * b, lambda: g * a),
                np.multiply, saves="ab",
                method=("mul", "multiply", "__mul__"),
                reflected="__rmul__", inplace=("mul_", "__imul__"))
true_divide = binary_op(
    "div", "Div", lambda c, g, a, b, o: _pair(c, lambda: g / b, lambda: g * o / b * -1.0),
    np.divide,
    float_only=True, b_domain=(0.5, 3.0), saves="bo",
    doc="a / b, always true (float) division, with broadcasting.\n\n    Example:\n"
        "        >>> import singa_tensor as st\n"
        "        >>> st.true_divide(st.tensor([1, 3]), 2).tolist()\n        [0.5, 1.5]\n",
    method=("true_divide", "__truediv__"), reflected="__rtruediv__",
    inplace=("div_", "true_divide_", "divide_", "__itruediv__"))
_floor_divide = binary_op(
    "floor_divide", None, lambda c, g, a, b, o: (g * 0.0, g * 0.0), np.floor_divide,
    b_domain=(0.5, 3.0), domain=(-5.0, 5.0), differentiable=False)


def _remainder_grad(c, g, a, b, o):
    return _pair(c, lambda: g, lambda: g * -floor_divide(a, b))


_remainder = binary_op("remainder", "Mod", _remainder_grad, np.mod, b_domain=(0.5, 3.0),
                       domain=(-5.0, 5.0))


def _pow_grad(c, g, a, b, o):
    def gb():
        logs = where(eq(a, 0.0), 0.0, log(where(eq(a, 0.0), 1.0, a)))
        return g * o * logs

    return _pair(c, lambda: g * b * pow(a, b - 1.0), gb)


def _np_pow(a, b):
    return np.power(a, b)


_pow = binary_op("pow", "Pow", _pow_grad, _np_pow, domain=(0.2, 3.0), b_domain=(-2.0, 2.0),
                 dtypes=_LOW_NAMES + ("float32", "float64"))


def _max_grad(c, g, a, b, o):
    m = cast(gt(a, b), g.dtype) + cast(eq(a, b), g.dtype) * 0.5
    return _pair(c, lambda: g * m, lambda: g * (1.0 - m))


def _min_grad(c, g, a, b, o):
    m = cast(lt(a, b), g.dtype) + cast(eq(a, b), g.dtype) * 0.5
    return _pair(c, lambda: g * m, lambda: g * (1.0 - m))


maximum = binary_op("maximum", "Max", _max_grad, np.maximum, method=True, inplace=True)
minimum = binary_op("minimum", "Min", _min_grad, np.minimum, method=True, inplace=True)


def _fmax_grad(c, g, a, b, o):  # the NaN-ignoring max: where b is NaN the result is a
    m = cast(logical_or(gt(a, b), isnan(b)), g.dtype) + cast(eq(a, b), g.dtype) * 0.5
    return _pair(c, lambda: g * m, lambda: g * (1.0 - m))


def _fmin_grad(c, g, a, b, o):
    m = cast(logical_or(lt(a, b), isnan(b)), g.dtype) + cast(eq(a, b), g.dtype) * 0.5
    return _pair(c, lambda: g * m, lambda: g * (1.0 - m))


fmax = binary_op("fmax", None, _fmax_grad, np.fmax, method=True,
                 doc="Elementwise maximum that ignores NaN: NaN only where both are NaN.\n\n"
                     "    Example:\n        >>> import singa_tensor as st\n"
                     "        >>> st.fmax(st.tensor([1.0, float('nan')]), st.tensor([2.0, 3.0]))"
                     ".tolist()\n        [2.0, 3.0]\n")
fmin = binary_op("fmin", None, _fmin_grad, np.fmin, method=True,
                 doc="Elementwise minimum that ignores NaN: NaN only where both are NaN.\n\n"
                     "    Example:\n        >>> import singa_tensor as st\n"
                     "        >>> st.fmin(st.tensor([1.0, float('nan')]), st.tensor([2.0, 3.0]))"
                     ".tolist()\n        [1.0, 3.0]\n")


def _atan2_grad(c, g, a, b, o):
    r2 = a * a + b * b
    return _pair(c, lambda: g * b / r2, lambda: g * -a / r2)


atan2 = binary_op(
    "atan2", None, _atan2_grad, np.arctan2, float_only=True, saves="ab",
    doc="The angle of the point (b, a), atan(a / b) in the right quadrant, in (-pi, pi].\n\n"
        "    Example:\n        >>> import singa_tensor as st\n"
        "        >>> y = st.atan2(st.tensor([1.0, 1.0]), st.tensor([1.0, -1.0]))\n"
        "        >>> [f'{v:.4f}' for v in y.tolist()]\n        ['0.7854', '2.3562']\n",
    method=("atan2", "arctan2"), inplace=("atan2_", "arctan2_"))
arctan2 = atan2
hypot = binary_op(
    "hypot", None, lambda c, g, a, b, o: _pair(c, lambda: g * a / o, lambda: g * b / o),
    np.hypot, float_only=True,
    doc="sqrt(a^2 + b^2) without overflow or underflow in the squares.\n\n"
        "    Example:\n        >>> import singa_tensor as st\n"
        "        >>> st.hypot(st.tensor([3.0, 1e200], dtype=st.float64), 4.0).tolist()\n"
        "        [5.0, 1e+200]\n",
    method=True, inplace=True)


def _copysign_grad(c, g, a, b, o):
    return g * where(eq(a, 0.0), 0.0, o / where(eq(a, 0.0), 1.0, a)), None


copysign = binary_op(
    "copysign", None, _copysign_grad, np.copysign, float_only=True, grad_domain=(0.2, 3.0),
    doc="The magnitude of a with the sign of b (its sign bit: -0.0 counts as negative).\n\n"
        "    Example:\n        >>> import singa_tensor as st\n"
        "        >>> st.copysign(st.tensor([1.0, -2.0, 3.0]), st.tensor([-1.0, 1.0, -0.0]))"
        ".tolist()\n        [-1.0, 2.0, -3.0]\n",
    method=True, inplace=True)
_fmod = binary_op("fmod", "Mod", lambda c, g, a, b, o: _pair(c, lambda: g,
                                                               lambda: g * -trunc(a / b)),
                  np.fmod,
                  b_domain=(0.5, 3.0), domain=(-5.0, 5.0), saves="ab")


def _check_int_divisor(op, a, b):
    if not b.dtype.is_floating_point and bool(any_zero(b)):
        raise ZeroDivisionError(f"{op}: integer division by zero")


def any_zero(b: Tensor) -> bool:
    from .reduce import amin

    return amin(abs(b)).item() == 0 if b.numel() else False


@tensor_method("floor_divide", "__floordiv__", reflected="__rfloordiv__",
               inplace=("floor_divide_", "__ifloordiv__"), inplace_kind="inplace_binary")
def floor_divide(a, b) -> Tensor:
    """Division rounded toward negative infinity (Python's //).

    Example:
        >>> import singa_tensor as st
        >>> st.floor_divide(st.tensor([7, -7]), 2).tolist()
        [3, -4]
    """
    a2, b2 = _operands("floor_divide", a, b)
    _check_int_divisor("floor_divide", a2, b2)
    return _floor_divide(a2, b2)


@tensor_method("remainder", "__mod__", reflected="__rmod__",
               inplace=("remainder_", "__imod__"), inplace_kind="inplace_binary")
def remainder(a, b) -> Tensor:
    """Python's modulo: the result has the sign of the divisor.

    Example:
        >>> import singa_tensor as st
        >>> st.remainder(st.tensor([7, -7]), 3).tolist()
        [1, 2]
    """
    a2, b2 = _operands("remainder", a, b)
    _check_int_divisor("remainder", a2, b2)
    return _remainder(a2, b2)


@tensor_method(inplace="fmod_", inplace_kind="inplace_binary")
def fmod(a, b) -> Tensor:
    """C's remainder: a - trunc(a / b) * b, with the sign of the dividend (compare remainder).

    Example:
        >>> import singa_tensor as st
        >>> st.fmod(st.tensor([7, -7]), 3).tolist(), st.fmod(st.tensor([-7.5]), 2).tolist()
        ([1, -1], [-1.5])
    """
    a2, b2 = _operands("fmod", a, b)
    _check_int_divisor("fmod", a2, b2)
    return _fmod(a2, b2)


@tensor_method("pow", "__pow__", reflected="__rpow__", inplace=("pow_", "__ipow__"),
               inplace_kind="inplace_binary")
def pow(a, b) -> Tensor:
    """a ** b with broadcasting; a Python-number exponent uses a faster kernel.

    Example:
        >>> import singa_tensor as st
        >>> st.pow(st.tensor([2.0, 3.0]), 2).tolist()
        [4.0, 9.0]
    """
    if a.__class__ is Tensor and isinstance(b, (int, float)) and not isinstance(b, bool):
        if a.dtype.is_floating_point:
            return _pow_scalar(a, float(b))
        if isinstance(b, int):
            if b < 0:
                raise ValueError("pow: integers to negative integer powers are not allowed")
            return _int_pow(a, b)
    a2, b2 = _operands("pow", a, b)
    if not a2.dtype.is_floating_point:
        a2, b2 = cast(a2, _dt.float32), cast(b2, _dt.float32)
    return _pow(a2, b2)


def _int_pow(a: Tensor, e: int) -> Tensor:
    return apply(_INT_POW, a, _scalar_tensor(e, a.dtype, a))


_INT_POW = type("IntPow", (OpSpec,), {
    "name": "_int_pow", "differentiable": False,
    "forward": staticmethod(lambda ctx, a, b: _run_binary(a, b, "pow")),
    "reference": staticmethod(lambda a, b: np.power(a, b)),
    "dtypes": ("int32", "int64"),
})


@tensor_method("div", "divide")
def div(a, b, *, rounding_mode: str | None = None) -> Tensor:
    """a / b with broadcasting: true division by default, or rounded toward zero
    (rounding_mode="trunc") or toward negative infinity ("floor", Python's //), which keep
    integer inputs integer.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([7, -7])
        >>> st.div(x, 2).tolist(), st.div(x, 2, rounding_mode="trunc").tolist()
        ([3.5, -3.5], [3, -3])
    """
    if rounding_mode is None:
        return true_divide(a, b)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    if rounding_mode != "trunc":
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    q = floor_divide(a, b)
    if not q.dtype.is_floating_point:
        # floor and trunc differ where the exact quotient is negative and not whole
        a2, b2 = _operands("div", a, b)
        inexact = ne(q * b2, a2)
        return where(logical_and(inexact, lt(q, 0)), q + 1, q)
    t = true_divide(a, b)
    return where(lt(t, 0.0), ceil(t), floor(t))


# ---- comparisons and logic --------------------------------------------------------------------

eq = binary_op("eq", "Equal", None, np.equal, out_bool=True,
               dtypes=_LOW_NAMES + ("float32", "float64", "int32", "int64", "bool"),
               method=("eq", "__eq__"))
ne = binary_op("ne", None, None, np.not_equal, out_bool=True,
               dtypes=_LOW_NAMES + ("float32", "float64", "int32", "int64", "bool"),
               method=("ne", "__ne__"))
lt = binary_op("lt", "Less", None, np.less, out_bool=True, method=("lt", "__lt__"))
le = binary_op("le", "LessOrEqual", None, np.less_equal, out_bool=True, method=("le", "__le__"))
gt = binary_op("gt", "Greater", None, np.greater, out_bool=True, method=("gt", "__gt__"))
ge = binary_op("ge", "GreaterOrEqual", None, np.greater_equal, out_bool=True,
               method=("ge", "__ge__"))


def _logical(name, onnx, reference, method=False, reflected=()):
    class Spec(OpSpec):
        pass

    Spec.__name__ = Spec.__qualname__ = name.title().replace("_", "")
    Spec.name, Spec.onnx, Spec.kind = name, onnx, "binary"
    Spec.differentiable = False
    Spec.dtypes = ("bool",)
    Spec.forward = staticmethod(lambda ctx, a, b: _run_binary(a, b, name))
    Spec.reference = staticmethod(reference)

    def fn(a, b):
        a = _to_bool(name, a)
        b = _to_bool(name, b) if b.__class__ is Tensor else _scalar_tensor(bool(b), _dt.bool_, a)
        check_same_device(name, a, b)
        return apply(Spec, a, b)

    fn.__name__ = name
    fn.__doc__ = (f"Elementwise {name} (non-zero is true), a bool tensor.\n\n    Example:\n"
                  f"        >>> import singa_tensor as st\n"
                  f"        >>> st.{name}(st.tensor([True, False]), st.tensor([True, True])).shape"
                  f"\n        (2,)\n")
    Spec.fn = staticmethod(fn)
    register(Spec)
    return declare_methods(fn, name, method, reflected=reflected)


def _to_bool(op, x):
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    return x if x.dtype is _dt.bool_ else cast(x, _dt.bool_)


logical_and = _logical("logical_and", "And", np.logical_and,
                       method=("logical_and", "__and__"), reflected="__rand__")
logical_or = _logical("logical_or", "Or", np.logical_or,
                      method=("logical_or", "__or__"), reflected="__ror__")
logical_xor = _logical("logical_xor", "Xor", np.logical_xor, method=("logical_xor", "__xor__"))


@register
class LogicalNot(OpSpec):
    name = "logical_not"
    onnx = "Not"
    kind = "unary"
    differentiable = False
    dtypes = ("bool",)

    @staticmethod
    def forward(ctx, x):
        return _run_unary(x, "logical_not")

    @staticmethod
    def reference(x):
        return np.logical_not(x)


@tensor_method()
def logical_not(x) -> Tensor:
    """Elementwise not (non-zero is true).

    Example:
        >>> import singa_tensor as st
        >>> st.logical_not(st.tensor([True, False])).tolist()
        [False, True]
    """
    return apply(LogicalNot, _to_bool("logical_not", x))


LogicalNot.fn = staticmethod(logical_not)


@tensor_method("__invert__")
def _invert(x: Tensor) -> Tensor:
    """~x for a bool tensor."""
    if x.dtype.name != "bool":
        raise TypeError("~ is only supported on bool tensors (use logical_not)")
    return logical_not(x)


@tensor_method("__pos__")
def _positive(x: Tensor) -> Tensor:
    """+x: x itself."""
    return x


@register
class Where(OpSpec):
    name = "where"
    onnx = "Where"
    dtypes = _LOW_NAMES + ("float32", "float64")

    @staticmethod
    def forward(ctx, cond, a, b):
        shape = broadcast_shapes(cond._shape, a._shape, b._shape, op="where")
        out = Tensor._empty(shape, a.dtype, a._device, a._be)
        shp = shape or (1,)
        sc = broadcast_strides(cond, shape) if shape else (0,)
        sa = broadcast_strides(a, shape) if shape else (0,)
        sb = broadcast_strides(b, shape) if shape else (0,)
        kernel(a, "where")(ptr(cond), ptr(a), ptr(b), ptr(out), len(shp), int64s(a, shp),
                           int64s(a, sc), int64s(a, sa), int64s(a, sb))
        ctx.save_for_backward(cond)
        ctx.shapes = (a._shape, b._shape)
        return out

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        zero = _scalar_tensor(0.0, g.dtype, g)
        ga = sum_to(where(cond, g, zero), ctx.shapes[0]) if ctx.needs_input_grad[1] else None
        gb = sum_to(where(cond, zero, g), ctx.shapes[1]) if ctx.needs_input_grad[2] else None
        return None, ga, gb

    @staticmethod
    def reference(cond, a, b):
        return np.where(cond, a, b)

    @staticmethod
    def samples():
        r = np.random.default_rng(5)
        return [
            ((r.standard_normal((3, 4)) > 0, r.standard_normal((3, 4)), r.standard_normal((4,))),
             {}),
            ((r.standard_normal((2, 1)) > 0, r.standard_normal((1, 3)), r.standard_normal(())),
             {}),
        ]


def where(cond, a=None, b=None) -> Tensor:
    """Pick from a where cond is true, else from b; all three broadcast.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([-1.0, 2.0])
        >>> st.where(x > 0, x, 0.0).tolist()
        [0.0, 2.0]
    """
    if cond.__class__ is not Tensor:
        raise TypeError(f"where: condition must be a Tensor, got {type(cond).__name__}")
    if a is None and b is None:  # where(cond) is nonzero(cond, as_tuple=True)
        from .index import nonzero

        return nonzero(cond, as_tuple=True)
    if a is None or b is None:
        raise TypeError("where: give both values (where(cond, a, b)) or neither (where(cond))")
    cond = _to_bool("where", cond)
    if a.__class__ is not Tensor and b.__class__ is not Tensor:
        a = _where_scalar(a, b, cond)  # two scalars: the pair's type, PyTorch's rule
    a, b = _operands("where", a, b)
    check_same_device("where", cond, a, b)
    return apply(Where, cond, a, b)


def _where_scalar(a, b, cond) -> Tensor:
    for v in (a, b):
        if not isinstance(v, (int, float, bool)):
            raise TypeError(f"where: expected a Tensor or a number, got {type(v).__name__}")
    kinds = [float if isinstance(v, float) else (bool if isinstance(v, bool) else int)
             for v in (a, b)]
    if float in kinds:
        d = _dt.default_float()
    else:
        d = _dt.int64 if int in kinds else _dt.bool_
    return _scalar_tensor(a, d, cond)


Where.fn = staticmethod(where)


@tensor_method(inplace="masked_fill_")
def masked_fill(x: Tensor, mask: Tensor, value) -> Tensor:
    """x with value written where mask is true (mask broadcasts to x).

    Example:
        >>> import singa_tensor as st
        >>> st.masked_fill(st.zeros(3), st.tensor([True, False, True]), 5.0).tolist()
        [5.0, 0.0, 5.0]
    """
    if x.__class__ is not Tensor or mask.__class__ is not Tensor:
        raise TypeError("masked_fill: input and mask must be Tensors")
    if mask.dtype is not _dt.bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {mask.dtype.name}")
    if broadcast_shapes(x._shape, mask._shape, op="masked_fill") != x._shape:
        raise ValueError(
            f"masked_fill: mask of shape {mask._shape} must broadcast to the input's shape "
            f"{x._shape}"
        )
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError("masked_fill: value must be a 0-d tensor or a number")
        v = cast(value, x.dtype)
    else:
        v = _scalar_tensor(value, x.dtype, x)
    return where(mask, v, x)



# ---- ONNX forms (see OpSpec.onnx_export): ops whose node needs attributes, or that have no
# ONNX op of their own but a short exact composition of ONNX ops ----------------------------------

_SPECS = _reg.REGISTRY


def _onnx_form(name):
    def attach(fn):
        _SPECS[name].onnx_export = classmethod(fn)
        return fn

    return attach


def _one(b, x, v):
    return b.scalar(v, x)


@_onnx_form("leaky_relu")
def _leaky_relu_onnx(cls, b, args, attrs, outs):
    b.node("LeakyRelu", [b.value(args[0])], outputs=outs, alpha=float(args[1]))


@_onnx_form("softplus")
def _softplus_onnx(cls, b, args, attrs, outs):
    # ONNX Softplus has neither beta nor threshold: log(1 + exp(beta x)) / beta, and x itself
    # where beta x > threshold
    x, beta, threshold = args
    name = b.value(x)
    scaled = name if beta == 1.0 else b.node("Mul", [name, _one(b, x, beta)])[0]
    (soft,) = b.node("Softplus", [scaled])
    if beta != 1.0:
        (soft,) = b.node("Div", [soft, _one(b, x, beta)])
    (big,) = b.node("Greater", [scaled, _one(b, x, threshold)])
    b.node("Where", [big, name, soft], outputs=outs)


@_onnx_form("elu")
def _elu_onnx(cls, b, args, attrs, outs):
    b.node("Elu", [b.value(args[0])], outputs=outs, alpha=float(args[1]))


@_onnx_form("clamp")
def _clamp_onnx(cls, b, args, attrs, outs):
    x, lo, hi = args
    bounds = ["" if math.isinf(v) else b.scalar(v, x) for v in (lo, hi)]
    b.node("Clip", [b.value(x)] + bounds, outputs=outs)


@_onnx_form("gelu")
def _gelu_onnx(cls, b, args, attrs, outs):
    x = args[0]
    if b.opset >= 20:
        b.node("Gelu", [b.value(x)], outputs=outs)
        return
    (z,) = b.node("Div", [b.value(x), b.scalar(math.sqrt(2.0), x)])
    (e,) = b.node("Erf", [z])
    (e1,) = b.node("Add", [e, _one(b, x, 1.0)])
    (h,) = b.node("Mul", [b.value(x), _one(b, x, 0.5)])
    b.node("Mul", [h, e1], outputs=outs)


@_onnx_form("gelu_tanh")
def _gelu_tanh_onnx(cls, b, args, attrs, outs):
    x = b.value(args[0])
    if b.opset >= 20:
        b.node("Gelu", [x], outputs=outs, approximate="tanh")
        return
    c = args[0]
    (x3,) = b.node("Mul", [x, x])
    (x3,) = b.node("Mul", [x3, x])
    (k,) = b.node("Mul", [x3, b.scalar(0.044715, c)])
    (k,) = b.node("Add", [x, k])
    (k,) = b.node("Mul", [k, b.scalar(_SQRT_2_PI, c)])
    (t,) = b.node("Tanh", [k])
    (t,) = b.node("Add", [t, b.scalar(1.0, c)])
    (h,) = b.node("Mul", [x, b.scalar(0.5, c)])
    b.node("Mul", [h, t], outputs=outs)


@_onnx_form("rsqrt")
def _rsqrt_onnx(cls, b, args, attrs, outs):
    (r,) = b.node("Sqrt", [b.value(args[0])])
    b.node("Reciprocal", [r], outputs=outs)


@_onnx_form("square")
def _square_onnx(cls, b, args, attrs, outs):
    x = b.value(args[0])
    b.node("Mul", [x, x], outputs=outs)


@_onnx_form("silu")
def _silu_onnx(cls, b, args, attrs, outs):
    x = b.value(args[0])
    (s,) = b.node("Sigmoid", [x])
    b.node("Mul", [x, s], outputs=outs)


@_onnx_form("log1p")
def _log1p_onnx(cls, b, args, attrs, outs):
    (y,) = b.node("Add", [b.value(args[0]), b.scalar(1.0, args[0])])
    b.node("Log", [y], outputs=outs)


@_onnx_form("expm1")
def _expm1_onnx(cls, b, args, attrs, outs):
    (y,) = b.node("Exp", [b.value(args[0])])
    b.node("Sub", [y, b.scalar(1.0, args[0])], outputs=outs)


@_onnx_form("pow_scalar")
def _pow_scalar_onnx(cls, b, args, attrs, outs):
    b.node("Pow", [b.value(args[0]), b.scalar(args[1], args[0])], outputs=outs)


@_onnx_form("ne")
def _ne_onnx(cls, b, args, attrs, outs):
    (e,) = b.node("Equal", [b.value(args[0]), b.value(args[1])])
    b.node("Not", [e], outputs=outs)


@_onnx_form("remainder")
def _remainder_onnx(cls, b, args, attrs, outs):
    a, d = args
    if not a.dtype.is_floating_point:
        b.node("Mod", [b.value(a), b.value(d)], outputs=outs, fmod=0)
        return
    # Python's modulo (sign of the divisor): a - floor(a / d) * d; ONNX's float Mod is fmod
    (q,) = b.node("Div", [b.value(a), b.value(d)])
    (q,) = b.node("Floor", [q])
    (q,) = b.node("Mul", [q, b.value(d)])
    b.node("Sub", [b.value(a), q], outputs=outs)


@_onnx_form("fmod")
def _fmod_onnx(cls, b, args, attrs, outs):
    b.node("Mod", [b.value(args[0]), b.value(args[1])], outputs=outs, fmod=1)


@_onnx_form("floor_divide")
def _floor_divide_onnx(cls, b, args, attrs, outs):
    a, d = args
    if not a.dtype.is_floating_point:
        return NotImplemented  # ONNX's integer Div truncates toward zero
    (q,) = b.node("Div", [b.value(a), b.value(d)])
    b.node("Floor", [q], outputs=outs)

__all__ = [
    "abs", "acos", "acosh", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctan2", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "clamp", "clip",
    "copysign", "cos", "cosh", "digamma", "div", "elu", "eq", "erf", "erfc", "erfinv", "exp",
    "exp2", "expm1", "fix", "floor", "floor_divide", "fmax", "fmin", "fmod", "frac", "ge",
    "gelu", "gt", "hypot", "isfinite", "isinf", "isnan", "le", "leaky_relu", "lgamma", "log",
    "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or", "logical_xor", "lt",
    "masked_fill", "maximum", "minimum", "mul", "ne", "neg", "polygamma", "pow", "reciprocal",
    "relu", "remainder", "round", "rsqrt", "sgn", "sigmoid", "sign", "silu", "sin", "sinh",
    "softplus", "sqrt", "square", "sub", "tan", "tanh", "true_divide", "trunc", "where",
]
