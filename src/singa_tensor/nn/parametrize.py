"""`nn.utils.parametrize`: a parameter or buffer computed by modules from stored originals.

`register_parametrization(m, "weight", P())` moves `m.weight` to
`m.parametrizations.weight.original` (or `original0`, `original1`, ... when P's
`right_inverse` returns several tensors) and makes `m.weight` a property that returns
`P()(original)`, recomputed on every read (or once per `cached()` block). Assigning to
`m.weight` runs the parametrizations' `right_inverse` in reverse and copies the result into
the originals. The module's class is swapped for a subclass holding the properties (as in
PyTorch), and restored when the last parametrization is removed.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor import nn
    >>> from singa_tensor.nn.utils import parametrize
    >>> class Symmetric(nn.Module):
    ...     def forward(self, x):
    ...         return x.triu() + x.triu(1).T
    >>> m = nn.Linear(3, 3)
    >>> _ = parametrize.register_parametrization(m, "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all()), list(m.state_dict())
    (True, ['bias', 'parametrizations.weight.original'])
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from .. import autograd as _ag
from ..tensor import Tensor
from .containers import ModuleDict, ModuleList
from .module import Module, Parameter, _set_data

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]

_cache_depth = 0
_cache: dict = {}


@contextlib.contextmanager
def cached():
    """Within the block, each parametrized tensor is computed once, on its first read, and
    reused (useful when a weight is read many times, as in a recurrent loop).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> from singa_tensor.nn.utils import parametrize
        >>> class Double(nn.Module):
        ...     def forward(self, x):
        ...         return x * 2
        >>> m = parametrize.register_parametrization(nn.Linear(2, 2), "weight", Double())
        >>> with parametrize.cached():
        ...     m.weight is m.weight
        True
        >>> m.weight is m.weight
        False
    """
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _register_tensor(module: Module, name: str, t: Tensor) -> None:
    if isinstance(t, Parameter):
        module.register_parameter(name, t)
    else:
        module.register_buffer(name, t)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the originals they read.

    Not made directly: `register_parametrization` builds it.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> from singa_tensor.nn.utils import parametrize
        >>> m = parametrize.register_parametrization(nn.Linear(2, 2), "bias", nn.Identity())
        >>> type(m.parametrizations.bias).__name__, m.parametrizations.bias.original.shape
        ('ParametrizationList', (2,))
    """

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False):
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with _ag.no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        object.__setattr__(self, "is_tensor", isinstance(new, Tensor))
        object.__setattr__(self, "ntensors", 1 if self.is_tensor else len(new))
        if self.is_tensor:
            if not unsafe and (new.shape != shape or new.dtype is not dtype):
                raise ValueError(
                    f"register_parametrization: right_inverse may not change the shape or dtype "
                    f"of the tensor unless unsafe=True: got {tuple(new.shape)} {new.dtype.name},"
                    f" expected {tuple(shape)} {dtype.name}")
            # keep the original Parameter object, so that optimizers holding it still work
            if new is not original:
                with _ag.no_grad():
                    _set_data(original, new.detach())
            _register_tensor(self, "original", original)
        else:
            if not isinstance(new, Sequence) or not all(isinstance(t, Tensor) for t in new):
                raise ValueError(f"register_parametrization: right_inverse must return a Tensor "
                                 f"or a sequence of Tensors, got {type(new).__name__}")
            for i, t in enumerate(new):
                t = t.detach()
                t = Parameter(t, original.requires_grad) if isinstance(original, Parameter) else t
                _register_tensor(self, f"original{i}", t)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"register_parametrization: a parametrization must return a "
                                 f"Tensor, got {type(z).__name__}")
            if z.shape != shape or z.dtype is not dtype:
                raise ValueError(
                    f"register_parametrization: registering a parametrization may not change "
                    f"the shape or dtype of the tensor unless unsafe=True: it gave "
                    f"{tuple(z.shape)} {z.dtype.name}, expected {tuple(shape)} {dtype.name}")

    def originals(self) -> list[Tensor]:
        if self.is_tensor:
            return [self.original]
        return [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that the parametrized tensor becomes value."""
        with _ag.no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       f"right_inverse, so the tensor cannot be assigned")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"right_inverse must return a Tensor, got "
                                     f"{type(value).__name__}")
                targets, values = [self.original], [value]
            else:
                if not isinstance(value, Sequence) or len(value) != self.ntensors:
                    raise ValueError(f"right_inverse must return a sequence of {self.ntensors} "
                                     f"tensors, got {value!r}")
                targets, values = self.originals(), list(value)
            for t, v in zip(targets, values):
                if v.shape != t.shape or v.dtype is not t.dtype:
                    raise ValueError(f"assigning to a parametrized tensor: right_inverse gave "
                                     f"{tuple(v.shape)} {v.dtype.name} for an original of "
                                     f"{tuple(t.shape)} {t.dtype.name}")
                t.copy_(v)

    def forward(self) -> Tensor:
        mods = list(self)
        x = mods[0](self.original) if self.is_tensor else mods[0](*self.originals())
        for m in mods[1:]:
            x = m(x)
        return x


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether module has any parametrization (or one on tensor_name).

    Example:
        >>> from singa_tensor import nn
        >>> is_parametrized(nn.Linear(2, 2))
        False
    """
    plist = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plist, ModuleDict):
        return False
    return len(plist) > 0 if tensor_name is None else tensor_name in plist


def type_before_parametrizations(module: Module) -> type:
    """The module's class as it was before any parametrization was registered.

    Example:
        >>> from singa_tensor import nn
        >>> type_before_parametrizations(nn.Linear(2, 2)).__name__
        'Linear'
    """
    cls = type(module)
    return cls.__bases__[0] if is_parametrized(module) else cls


def _inject_class(module: Module) -> None:
    cls = module.__class__

    def __setattr__(self, name, value):  # noqa: N807
        if is_parametrized(self, name):  # a Parameter too goes through right_inverse
            object.__setattr__(self, name, value)
        else:
            cls.__setattr__(self, name, value)

    new = type(f"Parametrized{cls.__name__}", (cls,), {"__setattr__": __setattr__,
                                                       "__module__": cls.__module__})
    module.__class__ = new


def _inject_property(module: Module, name: str) -> None:
    def get(self):
        plist = self.parametrizations[name]
        if _cache_depth:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(module.__class__, name, property(get, set_))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make module.<tensor_name> the output of parametrization applied to the stored
    original (see the module docstring). A second call on the same name chains another
    parametrization after the first. Returns module.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> class Positive(nn.Module):
        ...     def forward(self, x):
        ...         return x.exp()
        ...     def right_inverse(self, y):
        ...         return y.log()
        >>> m = register_parametrization(nn.Linear(1, 2), "bias", Positive())
        >>> m.bias = st.tensor([1.0, 2.0])
        >>> [round(v, 4) for v in m.bias.tolist()]
        [1.0, 2.0]
    """
    op = "register_parametrization"
    if not isinstance(module, Module):
        raise TypeError(f"{op}: module must be an nn.Module, got {type(module).__name__}")
    if not isinstance(parametrization, Module):
        raise TypeError(f"{op}: parametrization must be an nn.Module, got "
                        f"{type(parametrization).__name__}")
    if not isinstance(tensor_name, str):
        raise TypeError(f"{op}: tensor_name must be a str, got {type(tensor_name).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            before = getattr(module, tensor_name)
            after = parametrization(before)
            if not isinstance(after, Tensor) or after.shape != before.shape \
                    or after.dtype is not before.dtype:
                raise ValueError(f"{op}: the new parametrization of '{tensor_name}' may not "
                                 f"change its shape or dtype unless unsafe=True")
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
    elif tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"{op}: '{tensor_name}' of {type(module).__name__} is None")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"{op}: module '{type(module).__name__}' does not have a parameter, a "
                         f"buffer, or a parametrized element with name '{tensor_name}'")
    return module


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo `register_parametrization` on tensor_name: the tensor becomes a plain parameter
    (or buffer) again holding its current parametrized value, or, with
    leave_parametrized=False, the original. Returns module.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> class Double(nn.Module):
        ...     def forward(self, x):
        ...         return x * 2
        >>> m = nn.Linear(1, 1)
        >>> with st.no_grad():
        ...     _ = m.bias.fill_(1.0)
        >>> _ = register_parametrization(m, "bias", Double())
        >>> m = remove_parametrizations(m, "bias")
        >>> m.bias.tolist(), isinstance(m.bias, nn.Parameter), type(m).__name__
        ([2.0], True, 'Linear')
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"remove_parametrizations: module {type(module).__name__} does not "
                         f"have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with _ag.no_grad():
                _set_data(original, getattr(module, tensor_name).detach())
    else:
        if not leave_parametrized:
            raise ValueError("remove_parametrizations: cannot leave unparametrized "
                             "(leave_parametrized=False) a tensor that is parametrized in terms "
                             "of a sequence of tensors")
        with _ag.no_grad():
            t = getattr(module, tensor_name).detach()
        req = any(o.requires_grad for o in plist.originals())
        original = Parameter(t, req) if any(isinstance(o, Parameter)
                                            for o in plist.originals()) else t
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        del module.parametrizations
        module.__class__ = module.__class__.__bases__[0]
    return module
