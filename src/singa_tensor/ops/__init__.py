"""All ops, gathered from their family modules, and the Tensor methods bound to them."""

from __future__ import annotations

from ..tensor import Tensor
from . import elementwise, inplace, layout, reduce
from ._registry import REGISTRY, OpSpec, apply, register
from .elementwise import *  # noqa: F401,F403
from .inplace import copy_, fill_, zero_
from .layout import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403

_FAMILIES = [elementwise, layout, reduce]


def _load_optional_families() -> None:
    """Families that live in their own modules are imported if present."""
    import importlib

    for name in ("shape", "masks", "padding", "index", "subscript", "conv", "norm", "linalg",
                 "reduce_ext", "loss", "fused_updates", "attention", "attention_fused", "rnn",
                 "dense", "sort"):
        try:
            mod = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            continue
        _FAMILIES.append(mod)
        for k in getattr(mod, "__all__", []):
            globals()[k] = getattr(mod, k)


_load_optional_families()


def _public(name):
    for mod in _FAMILIES:
        if name in getattr(mod, "__all__", ()):
            return getattr(mod, name)
    return None


# ---- Tensor methods -------------------------------------------------------------------------

_E = elementwise


def _r(fn):
    return lambda self, other: fn(other, self)


_OPERATORS = {
    "__add__": _E.add, "__radd__": _r(_E.add), "__sub__": _E.sub, "__rsub__": _r(_E.sub),
    "__mul__": _E.mul, "__rmul__": _r(_E.mul), "__truediv__": _E.true_divide,
    "__rtruediv__": _r(_E.true_divide), "__floordiv__": _E.floor_divide,
    "__rfloordiv__": _r(_E.floor_divide), "__mod__": _E.remainder,
    "__rmod__": _r(_E.remainder), "__pow__": _E.pow, "__rpow__": _r(_E.pow),
    "__eq__": _E.eq, "__ne__": _E.ne, "__lt__": _E.lt, "__le__": _E.le, "__gt__": _E.gt,
    "__ge__": _E.ge, "__and__": _E.logical_and, "__or__": _E.logical_or,
    "__xor__": _E.logical_xor, "__rand__": _r(_E.logical_and), "__ror__": _r(_E.logical_or),
}
for _name, _fn in _OPERATORS.items():
    setattr(Tensor, _name, _fn)
Tensor.__neg__ = lambda self: _E.neg(self)
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = lambda self: _E.abs(self)


def _invert(self):
    if self.dtype.name != "bool":
        raise TypeError("~ is only supported on bool tensors (use logical_not)")
    return _E.logical_not(self)


Tensor.__invert__ = _invert
_matmul = _public("matmul")
Tensor.__matmul__ = _matmul
Tensor.__rmatmul__ = _r(_matmul)

_METHODS = [
    "abs", "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "log1p", "expm1", "sqrt",
    "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "sign", "erf", "floor", "ceil",
    "round", "clamp", "clip", "reciprocal", "square", "maximum", "minimum", "floor_divide",
    "remainder", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "masked_fill", "isnan", "isinf", "isfinite", "true_divide",
    "reshape", "view", "expand", "permute", "transpose", "t", "clone", "sum", "mean",
    "broadcast_to",
]
_EXTRA_METHODS = [
    "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std", "logsumexp",
    "softmax", "log_softmax", "cumsum", "cumprod", "norm", "all", "any",
    "flatten", "squeeze", "unsqueeze", "repeat", "split", "chunk", "unbind", "gather", "scatter",
    "scatter_add", "index_select", "flip", "tril", "triu", "narrow", "expand_as", "view_as",
    "reshape_as", "index_add", "nonzero", "matmul", "mm", "bmm", "outer", "dot", "swapaxes",
    "movedim", "type_as", "roll", "masked_select", "mv", "addmm", "select", "tile", "moveaxis",
    "swapdims", "diagonal", "trace", "sort", "argsort", "topk",
]
for _m in _METHODS + _EXTRA_METHODS:
    _f = _public(_m)
    if _f is not None and not hasattr(Tensor, _m):
        setattr(Tensor, _m, _f)

# aliases
Tensor.multiply = Tensor.mul
Tensor.subtract = Tensor.sub
Tensor.divide = Tensor.div
Tensor.contiguous = lambda self: layout.make_contiguous(self)


def _sized(fn):
    return lambda self, *shape: fn(self, *shape)


# in-place variants
_INPLACE_BINARY = {"add_": _E.add, "sub_": _E.sub, "mul_": _E.mul, "div_": _E.true_divide,
                   "pow_": _E.pow, "maximum_": _E.maximum, "minimum_": _E.minimum,
                   "remainder_": _E.remainder, "floor_divide_": _E.floor_divide}


def _make_inplace_binary(name, fn):
    def method(self, other, *, alpha=None):
        if alpha is not None:
            other = other * alpha
        return inplace.inplace_binary(self, other, fn, name)

    method.__name__ = name
    return method


for _name, _fn in _INPLACE_BINARY.items():
    setattr(Tensor, _name, _make_inplace_binary(_name, _fn))

_INPLACE_UNARY = ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu",
                  "clamp", "floor", "ceil", "round", "reciprocal", "sign", "square", "log1p",
                  "expm1", "rsqrt", "erf", "masked_fill", "clip"]


def _make_inplace_unary(name, fn):
    def method(self, *args, **kwargs):
        return inplace.inplace_unary(self, fn, name + "_", *args, **kwargs)

    method.__name__ = name + "_"
    return method


for _name in _INPLACE_UNARY:
    setattr(Tensor, _name + "_", _make_inplace_unary(_name, _public(_name)))

Tensor.fill_ = fill_
Tensor.zero_ = zero_
Tensor.copy_ = copy_
for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    _target = {"truediv": "div_", "floordiv": "floor_divide_", "mod": "remainder_"}.get(
        _op, _op + "_")
    setattr(Tensor, f"__i{_op}__", getattr(Tensor, _target))

__all__ = ["REGISTRY", "OpSpec", "apply", "register", "copy_", "fill_", "zero_"]
