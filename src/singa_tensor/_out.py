"""The `out=` keyword of the package's functions, with PyTorch's rules.

`st.add(a, b, out=c)` computes the result, then writes it into c and returns c:

- out has the result's device and a dtype the result can be cast to (`st.can_cast`: an
  integer result into a float tensor, not a float result into an integer one);
- an out tensor of another shape is resized to the result's (with a warning when it held
  elements, since that usually means a wrong shape);
- functions with out= do not record gradients: with grad mode on, an argument that requires
  grad (or an out that does) is an error;
- functions with several results (`st.sort`, `st.max(x, dim)`) take a tuple of tensors, one
  per result, and return them as the function's result type;
- out may be one of the inputs (`st.add(a, b, out=a)`): the result is computed first.

`install(namespace)` wraps the functions named in `NAMES` that the namespace defines; a call
without out= goes straight to the function.

Example:
    >>> import singa_tensor as st
    >>> c = st.empty(2)
    >>> st.add(st.ones(2), st.ones(2), out=c) is c, c.tolist()
    (True, [2.0, 2.0])
"""

from __future__ import annotations

import functools
import warnings

from . import autograd
from .tensor import Tensor

# PyTorch functions that take out=, by group
_ELEMENTWISE = """
abs absolute acos arccos acosh arccosh add addcdiv addcmul angle asin arcsin asinh arcsinh atan
arctan atan2 arctan2 atanh arctanh bitwise_and bitwise_not bitwise_or bitwise_xor
bitwise_left_shift bitwise_right_shift ceil clamp clip copysign cos cosh deg2rad digamma div
divide eq erf erfc erfinv exp exp2 expm1 fix float_power floor floor_divide fmax fmin fmod frac
ge greater_equal gt greater heaviside hypot i0 igamma igammac isneginf isposinf ldexp le
less_equal lerp lgamma log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not
logical_or logical_xor logit lt less maximum minimum mul multiply mvlgamma nan_to_num ne
not_equal neg negative nextafter polygamma pow positive rad2deg reciprocal remainder round
rsqrt sigmoid sign sgn signbit sin sinc sinh sqrt square sub subtract tan tanh true_divide
trunc xlogy where
"""
_REDUCTIONS = """
all amax amin aminmax any argmax argmin count_nonzero cummax cummin cumprod cumsum kthvalue
logcumsumexp logsumexp max mean median min mode nanmean nanmedian nansum norm prod quantile
nanquantile std sum var
"""
_LINALG = """
addbmm addmm addmv addr baddbmm bmm chain_matmul cholesky cholesky_inverse cholesky_solve cross
det dot ger inner inverse kron matmul mm mv outer qr slogdet svd tensordot trace tril triu vdot
"""
_SHAPES = """
argsort bucketize cat column_stack concat concatenate diag diff dstack gather hstack
index_select masked_select msort narrow_copy nonzero row_stack searchsorted sort stack take
take_along_dim topk unique_consecutive vstack histc bincount
"""
_CREATION = """
arange empty eye full linspace logspace ones rand randint randn randperm range zeros
"""
NAMES = frozenset((_ELEMENTWISE + _REDUCTIONS + _LINALG + _SHAPES + _CREATION).split())


def _inputs(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor):
                    yield b


def _write(name: str, result: Tensor, out) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    from .torch_misc import can_cast

    if out.device != result.device:
        raise RuntimeError(f"{name}(): expected the out tensor on {result.device}, got one on "
                           f"{out.device}")
    if out.dtype is not result.dtype and not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{name}(): result type {result.dtype.name} can't be cast to the "
                           f"desired output type {out.dtype.name}")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() != 0:
            warnings.warn(
                f"{name}(): an output with one or more elements was resized since it had "
                f"shape {list(out.shape)}, which does not match the required output shape "
                f"{list(result.shape)}. Pass an out tensor of the right shape, or one with no "
                f"elements", UserWarning, stacklevel=4)
        out.resize_(tuple(result.shape))
    with autograd.no_grad():
        out.copy_(result)
    return out


def _with_out(name: str, fn, args, kwargs, out):
    if autograd.is_grad_enabled():
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if any(isinstance(o, Tensor) and o.requires_grad for o in outs) or any(
                t.requires_grad for t in _inputs(args, kwargs)):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                               f"automatic differentiation, but one of the arguments requires "
                               f"grad")
    result = fn(*args, **kwargs)
    if isinstance(result, Tensor):
        return _write(name, result, out)
    if isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): out must be a tuple of {len(result)} tensors, got "
                            f"{type(out).__name__}"
                            + (f" of {len(out)}" if isinstance(out, (tuple, list)) else ""))
        written = [_write(name, r, o) for r, o in zip(result, out)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    raise TypeError(f"{name}(): out= is not supported for a result of type "
                    f"{type(result).__name__}")


def out_variant(name: str, fn):
    """fn taking PyTorch's out= keyword (see the module doc)."""

    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        return _with_out(name, fn, args, kwargs, out)

    call._without_out = fn
    return call


def install(namespace: dict) -> None:
    """Wrap each function of NAMES that the namespace defines, once; aliases (st.absolute and
    st.abs) stay one function, whose errors give its own name."""
    made: dict = {}
    for name in sorted(NAMES):
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not hasattr(fn, "_without_out"):
            if id(fn) not in made:
                made[id(fn)] = out_variant(getattr(fn, "__name__", name), fn)
            namespace[name] = made[id(fn)]
