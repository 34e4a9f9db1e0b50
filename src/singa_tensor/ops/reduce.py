"""Reductions over dimensions: each reduced set of dims is brought to the kernels' canonical
[outer, n, inner] form (a free view when the dims are adjacent, one copy otherwise).

This module holds the shared machinery and sum, mean, prod, max/min (values and indices),
amax/amin, argmax/argmin, all/any; reduce_ext.py holds var/std, logsumexp, softmax,
log_softmax, cumsum/cumprod and norm. It defines functions named sum, max, min, all and any,
so it never relies on the Python builtins of those names.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import creation as _cr
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from ._registry import (
    OpSpec,
    apply,
    contiguous,
    expect_tensor,
    kernel,
    ptr,
    register,
    tensor_method,
    traced,
)
from .elementwise import eq, maximum, minimum, where
from .layout import cast, expand, permute, reshape

_LOW = (_dt.float16, _dt.bfloat16)  # stored in 16 bits, computed in float32
# the dtypes of the reductions with kernels for every type: the 16-bit floats accumulate in
# float32 and round once
NUM_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")


def in_float(t: Tensor) -> Tensor:
    """t in float32 when it is float16/bfloat16, else t: composed backwards of 16-bit tensors
    compute in float32 and round once (as_dtype) at the end."""
    return cast(t, _dt.float32) if t.dtype in _LOW else t


def as_dtype(t: Tensor, dtype) -> Tensor:
    """t in dtype (a gradient in its input's dtype), without a copy when it already is."""
    return t if t.dtype is dtype else cast(t, dtype)


def normalize_dims(op: str, x: Tensor, dim) -> tuple:
    """dim (None, int or tuple of ints) as a sorted tuple of distinct non-negative dims."""
    nd = x.ndim
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, (list, tuple)):
        dims = tuple(_wrap_dim(d, nd, op) for d in dim)
        if len(set(dims)) != len(dims):
            raise ValueError(f"{op}: dim {tuple(dim)} appears multiple times in the list of dims")
        if nd == 0:
            return ()
        return tuple(sorted(dims))
    d = _wrap_dim(dim, nd, op)
    return (d,) if nd else ()


def np_axis(x: np.ndarray, dim):
    """dim as numpy's axis for a reference: a 0-d array accepts dim 0/-1 here as PyTorch
    does, which numpy spells axis=None."""
    if x.ndim == 0:
        return None
    return tuple(dim) if isinstance(dim, list) else dim


def reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def canonical(x: Tensor, dims: tuple):
    """(contiguous tensor, outer, n, inner) such that reducing its middle axis of
    [outer, n, inner] reduces x over dims."""
    shape = x._shape
    if not dims:
        return contiguous(x), x.numel(), 1, 1
    lo, hi = dims[0], dims[-1]
    if hi - lo + 1 == len(dims):  # adjacent dims: a view of the contiguous data
        xc = contiguous(x)
        outer = math.prod(shape[:lo])
        n = math.prod(shape[lo:hi + 1])
        inner = math.prod(shape[hi + 1:])
        return xc, outer, n, inner
    kept = [i for i in range(len(shape)) if i not in dims]
    with_grad_off = x._alias()
    xp = contiguous(permute(with_grad_off, *(kept + list(dims))))
    outer = math.prod(shape[i] for i in kept)
    n = math.prod(shape[i] for i in dims)
    return xp, outer, n, 1


def run_reduce(x: Tensor, dims: tuple, keepdim: bool, op: str, out_dtype=None, *extra):
    xc, outer, n, inner = canonical(x, dims)
    out = Tensor._empty(reduced_shape(x._shape, dims, keepdim), out_dtype or x.dtype, x._device,
                        x._be)
    if out.numel():
        kernel(x, op)(ptr(xc), ptr(out), outer, n, inner, *extra)
    return out


def grad_expand(g: Tensor, in_shape: tuple, dims: tuple, keepdim: bool) -> Tensor:
    """Broadcast a reduction's output gradient back over the reduced dims."""
    if not keepdim:
        g = reshape(g, *reduced_shape(in_shape, dims, True))
    return expand(g, *in_shape)


def _sum_dtype(x: Tensor):
    return _dt.int64 if x.dtype in (_dt.bool_, _dt.int32) else x.dtype


@register
class Sum(OpSpec):
    name = "sum"
    onnx = "ReduceSum"
    kind = "reduce"
    dtypes = NUM_DTYPES

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims, ctx.keepdim = x._shape, dims, keepdim
        return run_reduce(x, dims, keepdim, "sum")  # 16-bit floats: accumulated in float32

    @staticmethod
    def backward(ctx, g):
        return (grad_expand(g, ctx.in_shape, ctx.dims, ctx.keepdim),)

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        r = np.sum(x, axis=np_axis(x, dim), keepdims=keepdim)
        return r.astype(np.int64) if x.dtype in (np.int32, np.bool_) else r


@tensor_method()
def sum(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over dim (an int, a tuple, or None for all dims).

    Example:
        >>> import singa_tensor as st
        >>> st.sum(st.ones(2, 3), dim=1).tolist()
        [3.0, 3.0]
    """
    expect_tensor("sum", x)
    dims = normalize_dims("sum", x, dim)
    if dtype is not None:
        x = cast(x, _dt.as_dtype(dtype))
    elif x.dtype in (_dt.bool_, _dt.int32):
        x = cast(x, _dt.int64)
    return apply(Sum, x, dims, bool(keepdim))


Sum.fn = staticmethod(sum)


@tensor_method()
@traced("mean")
def mean(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over dim (float tensors); float16/bfloat16 give their own dtype (the sum
    accumulated in float32).

    Example:
        >>> import singa_tensor as st
        >>> st.mean(st.tensor([[1.0, 3.0]]), dim=-1).tolist()
        [2.0]
    """
    expect_tensor("mean", x)
    if dtype is not None:
        x = cast(x, _dt.as_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"mean: could not infer output dtype; input dtype must be floating point, got "
            f"{x.dtype.name} (pass dtype=st.float32)"
        )
    dims = normalize_dims("mean", x, dim)
    n = 1
    for d in dims:
        n *= x._shape[d]
    # a 16-bit sum is scaled in float32 (the reduced result only): 1 / n rounded to 16 bits
    # would be off by up to 1/2 ulp of float16, or a subnormal
    return as_dtype(in_float(sum(x, dims, keepdim)) * (1.0 / n if n else float("nan")), x.dtype)


@register
class Mean(OpSpec):
    name = "mean"
    onnx = "ReduceMean"
    kind = "reduce"
    composite = True
    dtypes = FLOAT_DTYPES

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return np.mean(x, axis=np_axis(x, dim), keepdims=keepdim)


Mean.fn = staticmethod(mean)



# ---- shared helpers ----------------------------------------------------------------------------


def _numel_over(shape: tuple, dims: tuple) -> int:
    return math.prod(shape[d] for d in dims)


def _float_input(op: str, x) -> Tensor:
    expect_tensor(op, x)
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"{op}: expected a floating point input, got {x.dtype.name} (convert it with "
            ".float() first)"
        )
    return x


def _widen_int(x: Tensor, dtype) -> Tensor:
    """The dtype sum-like ops accumulate in: an explicit dtype, else int64 for bool/int32."""
    if dtype is not None:
        return cast(x, _dt.as_dtype(dtype))
    if x.dtype in (_dt.bool_, _dt.int32):
        return cast(x, _dt.int64)
    return x


def _check_nonempty(op: str, x: Tensor, dims: tuple, dim_given: bool) -> None:
    """Reductions without an identity (max, argmax, ...) refuse an empty reduced dim."""
    for d in dims:
        if x._shape[d] == 0:
            if not dim_given:
                raise RuntimeError(
                    f"{op}: cannot reduce an empty tensor of shape {x._shape} (the operation has "
                    "no identity); specify a non-empty reduction dim"
                )
            raise IndexError(
                f"{op}: expected reduction dim {d} to have non-zero size, input shape {x._shape}"
            )


def _one_dim(op: str, x: Tensor, dim) -> int:
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be a single int, got {type(dim).__name__} {dim!r}")
    return _wrap_dim(dim, x.ndim, op)


def _keep_shape(shape: tuple, d: int) -> tuple:
    return tuple(1 if i == d else n for i, n in enumerate(shape))


def _along_dim(x: Tensor, d: int, op: str, out_dtype=None) -> Tensor:
    """Run a shape-preserving kernel (softmax, scans) along dim d."""
    xc, outer, n, inner = canonical(x, (d,) if x.ndim else ())
    out = Tensor._empty(x._shape, out_dtype or x.dtype, x._device, x._be)
    if out.numel():
        kernel(x, op)(ptr(xc), ptr(out), outer, n, inner)
    return out


# ---- prod --------------------------------------------------------------------------------------


@register
class Prod(OpSpec):
    """Product; its backward is exact for any number of zeros in a line to first order, and
    to second order where a reduced line holds no zero."""

    name = "prod"
    onnx = "ReduceProd"
    kind = "reduce"
    domain = (0.5, 1.5)
    dtypes = NUM_DTYPES

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims, ctx.keepdim = x._shape, dims, keepdim
        ctx.save_for_backward(x)
        return run_reduce(x, dims, keepdim, "prod")

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        dims = ctx.dims
        # d prod / d x_i is the product of the other elements: the product p of the non-zero
        # elements divided by x_i when the line has no zero, p at a line's only zero, else 0
        xf = in_float(x)
        zero = eq(xf, 0.0)
        nonzero = where(zero, 1.0, xf)
        p = prod(nonzero, dims, keepdim=True)
        zeros = sum(zero, dims, keepdim=True)
        others = where(zero, where(eq(zeros, 1), p, 0.0), where(eq(zeros, 0), p / nonzero, 0.0))
        gx = grad_expand(in_float(g), ctx.in_shape, dims, ctx.keepdim) * others
        return (as_dtype(gx, x.dtype),)

    @staticmethod
    def reference(x, dim=None, keepdim=False, *, dtype=None):
        r = np.prod(x, axis=np_axis(x, dim), keepdims=keepdim)
        return r.astype(np.int64) if x.dtype in (np.int32, np.bool_) else r

    @staticmethod
    def samples():
        return _samples(lambda r, s: r.uniform(0.5, 1.5, s) * r.choice([-1.0, 1.0], s))


@tensor_method()
def prod(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product over dim (an int, a tuple, or None for all dims); bool/int32 give int64.

    Example:
        >>> import singa_tensor as st
        >>> st.prod(st.tensor([[1.0, 2.0], [3.0, 4.0]]), dim=1).tolist()
        [2.0, 12.0]
    """
    expect_tensor("prod", x)
    dims = normalize_dims("prod", x, dim)
    return apply(Prod, _widen_int(x, dtype), dims, bool(keepdim))


Prod.fn = staticmethod(prod)


# ---- amax / amin, max / min --------------------------------------------------------------------


class _Extreme(OpSpec):
    """amax/amin: the gradient is shared evenly between the elements equal to the result."""

    kind = "reduce"
    dtypes = NUM_DTYPES
    kernel_op = "max"

    @classmethod
    def forward(cls, ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims, ctx.keepdim = x._shape, dims, keepdim
        y = run_reduce(x, dims, keepdim, cls.kernel_op)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gf = in_float(g)
        hit = cast(eq(x, grad_expand(y, ctx.in_shape, ctx.dims, ctx.keepdim)), gf.dtype)
        share = hit / sum(hit, ctx.dims, keepdim=True)
        return (as_dtype(grad_expand(gf, ctx.in_shape, ctx.dims, ctx.keepdim) * share, g.dtype),)


@register
class Amax(_Extreme):
    name = "amax"
    onnx = "ReduceMax"
    kernel_op = "max"

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return np.amax(x, axis=np_axis(x, dim), keepdims=keepdim)

    @staticmethod
    def samples():
        return _samples(_distinct)


@register
class Amin(_Extreme):
    name = "amin"
    onnx = "ReduceMin"
    kernel_op = "min"

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return np.amin(x, axis=np_axis(x, dim), keepdims=keepdim)

    @staticmethod
    def samples():
        return _samples(_distinct)


def _extreme(spec, x, dim, keepdim, op=None) -> Tensor:
    op = op or spec.name
    expect_tensor(op, x)
    dims = normalize_dims(op, x, dim)
    _check_nonempty(op, x, dims, dim is not None)
    return apply(spec, x, dims, bool(keepdim))


@tensor_method()
def amax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Largest value over dim (int, tuple or None); NaN wins. Gradient is split between ties.

    Example:
        >>> import singa_tensor as st
        >>> st.amax(st.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=0).tolist()
        [7.0, 5.0]
    """
    return _extreme(Amax, x, dim, keepdim)


@tensor_method()
def amin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Smallest value over dim (int, tuple or None); NaN wins. Gradient is split between ties.

    Example:
        >>> import singa_tensor as st
        >>> st.amin(st.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1).tolist()
        [1.0, 2.0]
    """
    return _extreme(Amin, x, dim, keepdim)


Amax.fn = staticmethod(amax)
Amin.fn = staticmethod(amin)


class ValuesIndices(NamedTuple):
    """What max/min with a dim return, like torch.return_types.max."""

    values: Tensor
    indices: Tensor


class _ExtremeWithIndex(OpSpec):
    """max/min along one dim: values from the max/min kernel, indices from argmax/argmin; the
    gradient goes to the index reported (the first occurrence), as in PyTorch."""

    kind = "custom"  # one int dim, not the tuple dims the generic reduce tests draw
    dtypes = NUM_DTYPES
    kernel_op = "max"

    @classmethod
    def forward(cls, ctx, x, d, keepdim):
        dims = (d,) if x.ndim else ()
        values = run_reduce(x, dims, keepdim, cls.kernel_op)
        indices = run_reduce(x, dims, keepdim, "arg" + cls.kernel_op, _dt.int64)
        ctx.in_shape, ctx.d, ctx.keepdim = x._shape, d, keepdim
        # kept as a plain attribute: saved outputs come back attached to the graph, and an
        # integer tensor has no business there
        ctx.indices = indices._alias()
        return values, indices

    @staticmethod
    def backward(ctx, g, _g_indices):
        shape, d = ctx.in_shape, ctx.d
        if not shape:
            return (g,)
        keep = _keep_shape(shape, d)
        idx = reshape(ctx.indices, *keep)
        g = reshape(g, *keep)
        line = tuple(n if i == d else 1 for i, n in enumerate(shape))
        positions = reshape(_cr.arange(shape[d], device=g.device), *line)
        return (as_dtype(g * cast(eq(idx, positions), g.dtype), g.dtype),)

    @staticmethod
    def samples():
        # the whole-tensor form first: the shared second-order test seeds every output, and
        # the int64 indices of the dim form cannot take a gradient
        r = np.random.default_rng(11)
        out = _samples(_distinct, single_dim=True)
        return [out.pop()] + out + [((r.standard_normal((2, 3)), r.standard_normal((3,))), {})]


def _reference_with_index(x, dim, keepdim, values_fn, index_fn, pairwise):
    if isinstance(dim, np.ndarray):
        return pairwise(x, dim)
    if dim is None:
        return values_fn(x, keepdims=keepdim) if keepdim else values_fn(x)
    if x.ndim == 0:
        return x.copy(), np.array(0, dtype=np.int64)
    return (values_fn(x, axis=np_axis(x, dim), keepdims=keepdim),
            index_fn(x, axis=np_axis(x, dim), keepdims=keepdim).astype(np.int64))


@register
class Max(_ExtremeWithIndex):
    name = "max"
    onnx = None  # exported as ReduceMax (amax) and ArgMax
    kernel_op = "max"

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return _reference_with_index(x, dim, keepdim, np.amax, np.argmax, np.maximum)


@register
class Min(_ExtremeWithIndex):
    name = "min"
    onnx = None  # exported as ReduceMin (amin) and ArgMin
    kernel_op = "min"

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return _reference_with_index(x, dim, keepdim, np.amin, np.argmin, np.minimum)


def _extreme_with_index(spec, whole, pairwise, x, dim, keepdim):
    op = spec.name
    expect_tensor(op, x)
    if isinstance(dim, Tensor):
        return pairwise(x, dim)
    if dim is None:
        return _extreme(whole, x, None, keepdim, op)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be a single int (use a{op} for several dims), got "
                        f"{dim!r}")
    d = _wrap_dim(dim, x.ndim, op)
    _check_nonempty(op, x, (d,) if x.ndim else (), True)
    return ValuesIndices(*apply(spec, x, d, bool(keepdim)))


@tensor_method()
def max(x: Tensor, dim=None, keepdim: bool = False):
    """The largest value; with an int dim, a named tuple (values, indices) along it; with a
    tensor as second argument, the elementwise maximum. NaN wins, like numpy.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0, 5.0], [7.0, 2.0]])
        >>> st.max(x).item(), st.max(x, dim=1).indices.tolist()
        (7.0, [1, 0])
    """
    return _extreme_with_index(Max, Amax, maximum, x, dim, keepdim)


@tensor_method()
def min(x: Tensor, dim=None, keepdim: bool = False):
    """The smallest value; with an int dim, a named tuple (values, indices) along it; with a
    tensor as second argument, the elementwise minimum. NaN wins, like numpy.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([[1.0, 5.0], [7.0, 2.0]])
        >>> st.min(x).item(), st.min(x, dim=0).values.tolist()
        (1.0, [1.0, 2.0])
    """
    return _extreme_with_index(Min, Amin, minimum, x, dim, keepdim)


Max.fn = staticmethod(max)
Min.fn = staticmethod(min)


# ---- argmax / argmin ---------------------------------------------------------------------------


class _ArgExtreme(OpSpec):
    kind = "custom"  # one int dim, not the tuple dims the generic reduce tests draw
    differentiable = False
    dtypes = NUM_DTYPES
    kernel_op = "argmax"

    @classmethod
    def forward(cls, ctx, x, d, keepdim):
        return run_reduce(x, (d,) if x.ndim else (), keepdim, cls.kernel_op, _dt.int64)

    @staticmethod
    def samples():
        return _samples(_distinct, single_dim=True)


def _arg_reference(fn, x, dim, keepdim):
    if x.ndim == 0:
        return np.array(0, dtype=np.int64)
    return np.asarray(fn(x, axis=np_axis(x, dim), keepdims=keepdim)).astype(np.int64)


@register
class Argmax(_ArgExtreme):
    name = "argmax"
    onnx = "ArgMax"
    kernel_op = "argmax"

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return _arg_reference(np.argmax, x, dim, keepdim)


@register
class Argmin(_ArgExtreme):
    name = "argmin"
    onnx = "ArgMin"
    kernel_op = "argmin"

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return _arg_reference(np.argmin, x, dim, keepdim)


def _arg_extreme(spec, x, dim, keepdim) -> Tensor:
    op = spec.name
    expect_tensor(op, x)
    x = x.detach()  # indices carry no gradient
    if dim is None:
        _check_nonempty(op, x, normalize_dims(op, x, None), False)
        out = apply(spec, reshape(x, x.numel()), 0, False)
        return reshape(out, *(1,) * x.ndim) if keepdim else out
    d = _one_dim(op, x, dim)
    _check_nonempty(op, x, (d,) if x.ndim else (), True)
    return apply(spec, x, d, bool(keepdim))


@tensor_method()
def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index (int64) of the largest value along dim, or in the flattened tensor when dim is
    None; the first occurrence wins ties, and a NaN wins over numbers.

    Example:
        >>> import singa_tensor as st
        >>> st.argmax(st.tensor([[1.0, 5.0], [7.0, 2.0]])).item()
        2
    """
    return _arg_extreme(Argmax, x, dim, keepdim)


@tensor_method()
def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index (int64) of the smallest value along dim, or in the flattened tensor when dim is
    None; the first occurrence wins ties, and a NaN wins over numbers.

    Example:
        >>> import singa_tensor as st
        >>> st.argmin(st.tensor([[1.0, 5.0], [7.0, 2.0]]), dim=1).tolist()
        [0, 1]
    """
    return _arg_extreme(Argmin, x, dim, keepdim)


Argmax.fn = staticmethod(argmax)
Argmin.fn = staticmethod(argmin)


# ---- all / any ---------------------------------------------------------------------------------


class _Logical(OpSpec):
    kind = "reduce"
    differentiable = False
    dtypes = ("bool", "int64", "float64")
    kernel_op = "min"
    identity = True

    @classmethod
    def forward(cls, ctx, x, dims, keepdim):
        if _numel_over(x._shape, dims) == 0:  # the kernels' u8 identities are not 0/1
            return _cr.full(reduced_shape(x._shape, dims, keepdim), cls.identity,
                            dtype=_dt.bool_, device=x.device)
        return run_reduce(x, dims, keepdim, cls.kernel_op)

    @staticmethod
    def samples():
        r = np.random.default_rng(13)
        out = _samples(lambda r, s: r.standard_normal(s) > -1.0)
        out.append(((np.zeros((2, 0, 3), dtype=bool),), {"dim": 1}))
        out.append(((r.standard_normal((2, 3)) > 0,), {"dim": 0}))
        return out


@register
class All(_Logical):
    name = "all"
    onnx = None
    kernel_op = "min"
    identity = True

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return np.asarray(np.all(x, axis=np_axis(x, dim), keepdims=keepdim))


@register
class Any(_Logical):
    name = "any"
    onnx = None
    kernel_op = "max"
    identity = False

    @staticmethod
    def reference(x, dim=None, keepdim=False):
        return np.asarray(np.any(x, axis=np_axis(x, dim), keepdims=keepdim))


def _logical(spec, x, dim, keepdim) -> Tensor:
    expect_tensor(spec.name, x)
    dims = normalize_dims(spec.name, x, dim)
    xb = x if x.dtype is _dt.bool_ else cast(x.detach(), _dt.bool_)
    return apply(spec, xb, dims, bool(keepdim))


@tensor_method()
def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """True where every element over dim is non-zero (True for an empty reduction).

    Example:
        >>> import singa_tensor as st
        >>> st.all(st.tensor([[1, 0], [2, 3]]), dim=1).tolist()
        [False, True]
    """
    return _logical(All, x, dim, keepdim)


@tensor_method()
def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """True where some element over dim is non-zero (False for an empty reduction).

    Example:
        >>> import singa_tensor as st
        >>> st.any(st.tensor([[0.0, 0.0], [0.0, 2.0]]), dim=1).tolist()
        [False, True]
    """
    return _logical(Any, x, dim, keepdim)


All.fn = staticmethod(all)
Any.fn = staticmethod(any)


# ---- test samples ------------------------------------------------------------------------------

# (shape, kwargs) sets every reduction is tried on: 0-d, a size-1 dim, int / negative / tuple /
# None dims, keepdim both ways
_CASES = [
    ((2, 3, 4), {"dim": 1}),
    ((2, 3, 4), {"dim": -1, "keepdim": True}),
    ((2, 3, 4), {"dim": (0, 2)}),
    ((2, 3, 2), {"dim": (-1, 0), "keepdim": True}),
    ((2, 3, 4), {}),
    ((3, 1, 2), {"dim": 1}),
    ((3, 1, 2), {"dim": None, "keepdim": True}),
    ((5,), {"dim": 0}),
    ((), {}),
    ((), {"dim": 0, "keepdim": True}),
]
_SINGLE_CASES = [c for c in _CASES if isinstance(c[1].get("dim"), int)] + [
    ((3, 1, 2), {"dim": -2, "keepdim": True}),
]


def _normal(r, shape):
    return r.standard_normal(shape)


def _distinct(r, shape):
    """Values without ties, so that max/min gradients are well defined."""
    n = math.prod(shape)
    return ((r.permutation(n) - n / 2) * 0.25 + 0.1).reshape(shape)


def _samples(make, single_dim: bool = False, allow_none: bool = True,
             keepdim: bool = True) -> list:
    """Sample arguments for make(rng, shape) over _CASES (or the one-int-dim cases); without
    keepdim for the shape-preserving ops (softmax, scans), which take none."""
    r = np.random.default_rng(10)
    cases = _SINGLE_CASES if single_dim else _CASES
    out = []
    for shape, kw in cases:
        kw = dict(kw) if keepdim else {k: v for k, v in kw.items() if k != "keepdim"}
        out.append(((np.asarray(make(r, shape)),), kw))
    if single_dim and allow_none:
        out.append(((np.asarray(make(r, (2, 3))),), {}))
    return out


Sum.samples = staticmethod(lambda: _samples(_normal))
Mean.samples = staticmethod(lambda: _samples(_normal))



# ---- ONNX forms (OpSpec.onnx_export) -------------------------------------------------------------


def onnx_reduce(b, op: str, x: Tensor | str, dims, keepdim: bool, outs) -> None:
    """A Reduce* node over x (a tensor or a value name); axes are an input from opset 13
    (ReduceSum) or 18 (the others)."""
    dims = [int(d) for d in dims]
    name = x if isinstance(x, str) else b.value(x)
    if not dims:  # a 0-d input: the reduction of one element (an empty axes list means "all")
        if op in ("ReduceL1", "ReduceL2"):
            b.node("Abs", [name], outputs=outs)
        elif op == "ReduceSumSquare":
            b.node("Mul", [name, name], outputs=outs)
        else:
            b.node("Identity", [name], outputs=outs)
        return
    since = 13 if op == "ReduceSum" else 18
    if b.opset >= since:
        b.node(op, [name, b.ints(dims)], outputs=outs, keepdims=int(keepdim))
    else:
        b.node(op, [name], outputs=outs, axes=dims, keepdims=int(keepdim))


def _reduce_onnx(cls, b, args, attrs, outs):
    x, dims, keepdim = args
    onnx_reduce(b, cls.onnx, x, dims, keepdim, outs)


def _arg_onnx(cls, b, args, attrs, outs):
    x, d, keepdim = args
    if x.ndim == 0:  # the one element's index, whatever its value
        b.node("Identity", [b.const(np.zeros((), dtype=np.int64))], outputs=outs)
        return
    b.node(cls.onnx, [b.value(x)], outputs=outs, axis=int(d), keepdims=int(keepdim))


def _with_index_onnx(cls, b, args, attrs, outs):
    x, d, keepdim = args
    if x.ndim == 0:
        return NotImplemented
    kind = "Max" if cls.kernel_op == "max" else "Min"
    onnx_reduce(b, "Reduce" + kind, x, (d,), keepdim, outs[:1])
    b.node("Arg" + kind, [b.value(x)], outputs=outs[1:], axis=int(d), keepdims=int(keepdim))


def _mean_onnx(cls, b, args, attrs, outs):
    # one ReduceMean: its divisor follows the input's shape (a traced 1/n would be a constant)
    x = args["x"]
    if args["dtype"] is not None or x.dtype not in (_dt.float32, _dt.float64):
        return NotImplemented
    onnx_reduce(b, "ReduceMean", x, normalize_dims("mean", x, args["dim"]), args["keepdim"],
                outs)


for _spec in (Sum, Prod, Amax, Amin):
    _spec.onnx_export = classmethod(_reduce_onnx)
Mean.onnx_export = classmethod(_mean_onnx)
for _spec in (Argmax, Argmin):
    _spec.onnx_export = classmethod(_arg_onnx)
for _spec in (Max, Min):
    _spec.onnx_export = classmethod(_with_index_onnx)

__all__ = [
    "all", "amax", "amin", "any", "argmax", "argmin", "max", "mean", "min", "prod", "sum",
]
