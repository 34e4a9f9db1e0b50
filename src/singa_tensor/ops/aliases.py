"""PyTorch's other names for existing ops, and the in-place forms it offers of them.

An alias is the op itself under a second name (`st.multiply is st.mul`) or a one-line wrapper
that fixes an argument (`msort` is `sort` along dim 0); none computes anything of its own, so
the registry tests of the original cover it. The in-place forms follow ops/inplace.py: the
result is computed out of place and written back (`inplace_unary`), except for

- results that are not differentiable (comparisons, logical ops): the tensor leaves the graph,
  as `fill_` does, since its new value does not depend on the old one through any gradient;
- in-place changes of the view itself (`t_`, `transpose_`, `squeeze_`, `resize_`): the tensor
  takes the shape and strides of the view the out-of-place op makes, and its place in the graph.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor, _wrap_dim
from . import activation as _act
from . import elementwise as _el
from . import layout as _lay
from . import linalg as _la
from . import reduce_ext as _rx
from . import shape as _sh
from . import sort as _so
from ._registry import bind_method
from .inplace import check_inplace, inplace_unary, write_result

# ---- plain aliases ---------------------------------------------------------------------------
absolute = _el.abs
multiply = _el.mul
subtract = _el.sub
divide = _el.div
greater = bind_method(_el.gt, "greater")
greater_equal = bind_method(_el.ge, "greater_equal")
less = bind_method(_el.lt, "less")
less_equal = bind_method(_el.le, "less_equal")
not_equal = bind_method(_el.ne, "not_equal")
negative = _el.neg
concat = concatenate = _sh.cat
ger = bind_method(_la.outer, "ger")
bind_method(_el.abs, "absolute")
bind_method(_el.neg, "negative")
bind_method(_act.prelu)


def _expect(op: str, x) -> None:
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")


def positive(input: Tensor) -> Tensor:
    """The input itself (unary plus); booleans are refused as in PyTorch.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([-1.0, 2.0])
        >>> st.positive(x) is x
        True
    """
    _expect("positive", input)
    if input.dtype.name == "bool":
        raise TypeError("positive: the `+` operator on a bool tensor is not supported")
    return input


bind_method(positive)


def ravel(input: Tensor) -> Tensor:
    """The elements as one dimension (a view when the layout allows, else a copy).

    Example:
        >>> import singa_tensor as st
        >>> st.ravel(st.zeros(2, 3)).shape
        (6,)
    """
    _expect("ravel", input)
    return _sh.flatten(input)


bind_method(ravel)


def msort(input: Tensor) -> Tensor:
    """The values sorted along the first dimension (`sort(input, dim=0).values`).

    Example:
        >>> import singa_tensor as st
        >>> st.msort(st.tensor([[3.0, 1.0], [2.0, 4.0]])).tolist()
        [[2.0, 1.0], [3.0, 4.0]]
    """
    _expect("msort", input)
    return _so.sort(input, 0)[0]


bind_method(msort)


def clamp_min(input: Tensor, min) -> Tensor:
    """Values below min raised to min (`clamp(input, min=min)`).

    Example:
        >>> import singa_tensor as st
        >>> st.clamp_min(st.tensor([-2.0, 3.0]), 0.0).tolist()
        [0.0, 3.0]
    """
    return _el.clamp(input, min=min)


def clamp_max(input: Tensor, max) -> Tensor:
    """Values above max lowered to max (`clamp(input, max=max)`).

    Example:
        >>> import singa_tensor as st
        >>> st.clamp_max(st.tensor([-2.0, 3.0]), 1.0).tolist()
        [-2.0, 1.0]
    """
    return _el.clamp(input, max=max)


bind_method(clamp_min, inplace="clamp_min_")
bind_method(clamp_max, inplace="clamp_max_")


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum of products over the last dimension of both (a scalar times a tensor scales it).

    Example:
        >>> import singa_tensor as st
        >>> st.inner(st.tensor([[1.0, 2.0]]), st.tensor([[3.0, 4.0], [1.0, 0.0]])).tolist()
        [[11.0, 1.0]]
    """
    _expect("inner", input)
    _expect("inner", other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ValueError(f"inner: the last dimensions of shapes {input.shape} and {other.shape} "
                         "differ")
    from .more_shape import tensordot

    return tensordot(input, other, dims=([input.ndim - 1], [other.ndim - 1]))


bind_method(inner)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors (real tensors: `dot`).

    Example:
        >>> import singa_tensor as st
        >>> st.vdot(st.tensor([1.0, 2.0]), st.tensor([3.0, 4.0])).item()
        11.0
    """
    _expect("vdot", input)
    _expect("vdot", other)
    if input.ndim != 1 or other.ndim != 1:
        raise ValueError(f"vdot: expected 1-D tensors, got shapes {input.shape} and "
                         f"{other.shape}")
    return _la.dot(input, other)


bind_method(vdot)


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    """Pieces of the given sizes along dim; the sizes must add up to its length.

    Example:
        >>> import singa_tensor as st
        >>> [p.shape for p in st.split_with_sizes(st.zeros(5, 2), [2, 3])]
        [(2, 2), (3, 2)]
    """
    _expect("split_with_sizes", input)
    sizes = list(split_sizes)
    if not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ValueError(f"split_with_sizes: sizes must be non-negative ints, got {sizes}")
    n = input.shape[_wrap_dim(dim, input.ndim, "split_with_sizes")]
    if sum(sizes) != n:
        raise ValueError(f"split_with_sizes: sizes {sizes} add up to {sum(sizes)}, but "
                         f"dimension {dim} has length {n}")
    return _sh.split(input, sizes, dim)


bind_method(split_with_sizes)


def _where_method(self: Tensor, condition, other) -> Tensor:
    """`self` where condition holds, other elsewhere (`st.where(condition, self, other)`).

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([1.0, 2.0]).where(st.tensor([True, False]), 0.0).tolist()
        [1.0, 0.0]
    """
    return _el.where(condition, self, other)


bind_method(_where_method, "where")


def rsub(input: Tensor, other, *, alpha=1) -> Tensor:
    """other - alpha * input (subtraction with the operands reversed).

    Example:
        >>> import singa_tensor as st
        >>> st.rsub(st.tensor([1.0, 2.0]), 10.0).tolist()
        [9.0, 8.0]
    """
    _expect("rsub", input)
    return other - (input if alpha == 1 else input * alpha)


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Split dimension dim into the dimensions sizes (one of them may be -1).

    Example:
        >>> import singa_tensor as st
        >>> st.unflatten(st.zeros(2, 6), 1, (2, -1)).shape
        (2, 2, 3)
    """
    _expect("unflatten", input)
    d = _wrap_dim(dim, input.ndim, "unflatten")
    sizes = tuple(sizes)
    if not sizes:
        raise ValueError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise ValueError(f"unflatten: only one dimension can be inferred, got sizes {sizes}")
    n = input.shape[d]
    known = 1
    for s in sizes:
        known *= 1 if s == -1 else s
    if (-1 not in sizes and known != n) or (-1 in sizes and (known == 0 or n % known)):
        raise ValueError(f"unflatten: provided sizes {sizes} don't multiply up to the size of "
                         f"dim {dim} ({n}) in the input tensor")
    return input.reshape(*input.shape[:d], *sizes, *input.shape[d + 1:])


bind_method(unflatten)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of input - other (broadcast), as a 0-d tensor.

    Example:
        >>> import singa_tensor as st
        >>> st.dist(st.tensor([3.0, 0.0]), st.tensor([0.0, 4.0])).item()
        5.0
    """
    _expect("dist", input)
    return _rx.norm(input - other, p)


bind_method(dist)


def isreal(input: Tensor) -> Tensor:
    """Whether each element is real: always True, as no dtype here is complex.

    Example:
        >>> import singa_tensor as st
        >>> st.isreal(st.tensor([1.0, 2.0])).tolist()
        [True, True]
    """
    _expect("isreal", input)
    from .. import creation

    return creation.ones(input.shape, dtype=_dt.bool_, device=input.device)


bind_method(isreal)


def _hardshrink_method(self: Tensor, lambd: float = 0.5) -> Tensor:
    """`st.hardshrink(self, lambd)`: elements of magnitude at most lambd become 0.

    Example:
        >>> import singa_tensor as st
        >>> st.tensor([-2.0, 0.25]).hardshrink().tolist()
        [-2.0, 0.0]
    """
    return _act.hardshrink(self, lambd)


bind_method(_hardshrink_method, "hardshrink")


# ---- in-place forms --------------------------------------------------------------------------
def _inplace_of(fn: Callable, name: str, example: str) -> Callable:
    """The function `name` that computes fn out of place and writes the result into input."""
    def op(input: Tensor, *args, **kwargs) -> Tensor:
        return inplace_unary(input, fn, name, *args, **kwargs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"In-place `{fn.__name__}`: the result is written into input, which is "
                  f"returned.\n\n    Example:\n        >>> import singa_tensor as st\n"
                  f"        >>> x = st.tensor([0.25, 0.5])\n"
                  f"        >>> st.{name}({example}) is x\n        True\n")
    return op


_TOP_INPLACE = {  # torch.<name>_ of an op: (the op, the call in its example)
    "abs_": (_el.abs, "x"), "ceil_": (_el.ceil, "x"), "cos_": (_el.cos, "x"),
    "erf_": (_el.erf, "x"), "exp_": (_el.exp, "x"), "expm1_": (_el.expm1, "x"),
    "floor_": (_el.floor, "x"), "log_": (_el.log, "x"), "log1p_": (_el.log1p, "x"),
    "neg_": (_el.neg, "x"), "negative_": (_el.neg, "x"), "reciprocal_": (_el.reciprocal, "x"),
    "relu_": (_el.relu, "x"), "round_": (_el.round, "x"), "rsqrt_": (_el.rsqrt, "x"),
    "sigmoid_": (_el.sigmoid, "x"), "sin_": (_el.sin, "x"), "sqrt_": (_el.sqrt, "x"),
    "square_": (_el.square, "x"), "tan_": (_el.tan, "x"), "tanh_": (_el.tanh, "x"),
    "clamp_": (_el.clamp, "x, min=0.3"), "clip_": (_el.clamp, "x, max=0.3"),
    "clamp_min_": (clamp_min, "x, 0.3"), "clamp_max_": (clamp_max, "x, 0.3"),
    "celu_": (_act.celu, "x"), "selu_": (_act.selu, "x"), "rrelu_": (_act.rrelu, "x"),
    "threshold_": (_act.threshold, "x, 0.3, 0.0"),
}
globals().update({n: _inplace_of(fn, n, ex) for n, (fn, ex) in _TOP_INPLACE.items()})

_METHOD_INPLACE = {  # Tensor-only in-place forms: Tensor.<name>
    "negative_": _el.neg, "multiply_": _el.mul, "subtract_": _el.sub,
    "absolute_": _el.abs, "cumsum_": _rx.cumsum, "cumprod_": _rx.cumprod, "tan_": _el.tan,
    "addmm_": _la.addmm,
}
for _n, _fn in _METHOD_INPLACE.items():
    bind_method(_inplace_of(_fn, _n, "x"))


def _detached_inplace(fn: Callable, name: str) -> Callable:
    """In-place form of an op whose result has no gradient: the tensor leaves the graph."""
    def op(input: Tensor, *args) -> Tensor:
        check_inplace(input, name)
        with _ag.no_grad():
            write_result(input, fn(input, *args), name)
        if input._node is not None:
            input._node = None
            input.requires_grad = False
        return input

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"In-place `{fn.__name__}`: the result, in input's dtype, is written into "
                  f"input.\n\n    Example:\n        >>> import singa_tensor as st\n"
                  f"        >>> st.tensor([1.0, 2.0]).{name}("
                  f"{'' if name == 'logical_not_' else '1.0'}).tolist()\n"
                  f"        {_DETACHED_EXAMPLES[name]}\n")
    return op


_DETACHED = {
    "eq_": _el.eq, "ne_": _el.ne, "lt_": _el.lt, "le_": _el.le, "gt_": _el.gt, "ge_": _el.ge,
    "greater_": _el.gt, "greater_equal_": _el.ge, "less_": _el.lt, "less_equal_": _el.le,
    "not_equal_": _el.ne, "logical_and_": _el.logical_and, "logical_or_": _el.logical_or,
    "logical_xor_": _el.logical_xor, "logical_not_": _el.logical_not,
}
_DETACHED_EXAMPLES = {
    "eq_": "[1.0, 0.0]", "ne_": "[0.0, 1.0]", "lt_": "[0.0, 0.0]", "le_": "[1.0, 0.0]",
    "gt_": "[0.0, 1.0]", "ge_": "[1.0, 1.0]", "greater_": "[0.0, 1.0]",
    "greater_equal_": "[1.0, 1.0]", "less_": "[0.0, 0.0]", "less_equal_": "[1.0, 0.0]",
    "not_equal_": "[0.0, 1.0]", "logical_and_": "[1.0, 1.0]", "logical_or_": "[1.0, 1.0]",
    "logical_xor_": "[0.0, 0.0]", "logical_not_": "[0.0, 0.0]",
}
for _n, _fn in _DETACHED.items():
    bind_method(_detached_inplace(_fn, _n))


# ---- in-place changes of the view ------------------------------------------------------------
def _take_view(x: Tensor, view: Tensor, op: str) -> Tensor:
    """x becomes view (same storage): its shape, strides and offset, and its graph place."""
    x._shape, x._strides, x._offset, x._contig = (view._shape, view._strides, view._offset,
                                                  view._contig)
    if view._node is not None and _ag._mode.enabled:
        x._node, x._out, x.requires_grad = view._node, view._out, True
    # a backward that saved x saw its old layout: make it refuse rather than misread
    x._storage.version += 1
    return x


def _restrider(fn: Callable, name: str, call: str, shape: str) -> Callable:
    """The Tensor method `name`: fn's view of the tensor, taken by the tensor itself."""
    def op(input: Tensor, *args) -> Tensor:
        check_inplace(input, name, writes=False)
        return _take_view(input, fn(input, *args), name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"In-place `{fn.__name__}`: the tensor itself takes the new shape and "
                  f"strides (no data moves).\n\n    Example:\n"
                  f"        >>> import singa_tensor as st\n"
                  f"        >>> st.{call}.shape\n        {shape}\n")
    return op


for _n, _fn, _call, _shape in (
        ("t_", _lay.t, "zeros(2, 3).t_()", "(3, 2)"),
        ("transpose_", _lay.transpose, "zeros(2, 1, 3).transpose_(0, 2)", "(3, 1, 2)"),
        ("swapaxes_", _lay.transpose, "zeros(2, 1, 3).swapaxes_(0, 2)", "(3, 1, 2)"),
        ("swapdims_", _lay.transpose, "zeros(2, 1, 3).swapdims_(0, 2)", "(3, 1, 2)"),
        ("squeeze_", _sh.squeeze, "zeros(2, 1, 3).squeeze_()", "(2, 3)"),
        ("unsqueeze_", _sh.unsqueeze, "zeros(2, 3).unsqueeze_(0)", "(1, 2, 3)")):
    bind_method(_restrider(_fn, _n, _call, _shape))


def resize_(input: Tensor, *size) -> Tensor:
    """Give the tensor a new shape, contiguous over its storage; a tensor that owns its
    storage may grow (the new elements are uninitialized) or shrink.

    Example:
        >>> import singa_tensor as st
        >>> st.arange(6.0).resize_(2, 3).tolist()
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    _expect("resize_", input)
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    if not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError(f"resize_: sizes must be non-negative ints, got {shape}")
    if input.requires_grad:
        raise RuntimeError("resize_: cannot resize a tensor that requires grad")
    n = 1
    for s in shape:
        n *= s
    from ..tensor import contiguous_strides

    item = input.dtype.itemsize
    room = input._storage.nbytes // item - input._offset
    if n > room:
        if input._base is not None:
            raise RuntimeError(f"resize_: a view (of {room} elements' storage) can't grow to "
                               f"{n} elements; resize the tensor that owns the storage")
        if not input._contig:
            raise RuntimeError("resize_: growing a non-contiguous tensor is not supported; "
                               "call .contiguous() first")
        old = input._alias()
        fresh = Tensor._empty((n,), input.dtype, input.device, input._be)
        from ._registry import copy_into

        copy_into(_sh.flatten(old), fresh[:old.numel()])
        input._storage, input._offset = fresh._storage, 0
    input._shape, input._strides, input._contig = shape, contiguous_strides(shape), True
    input._storage.version += 1
    return input


def resize_as_(input: Tensor, the_template: Tensor) -> Tensor:
    """`resize_` to the shape of the_template.

    Example:
        >>> import singa_tensor as st
        >>> st.zeros(6).resize_as_(st.zeros(3, 2)).shape
        (3, 2)
    """
    _expect("resize_as_", the_template)
    return resize_(input, the_template.shape)


bind_method(resize_)
bind_method(resize_as_)


__all__ = [
    "absolute", "multiply", "subtract", "divide", "greater", "greater_equal", "less",
    "less_equal", "not_equal", "negative", "positive", "concat", "concatenate", "ravel",
    "msort", "clamp_min", "clamp_max", "ger", "inner", "vdot", "split_with_sizes",
    "rsub", "unflatten", "dist", "isreal",
    *_TOP_INPLACE,
]
