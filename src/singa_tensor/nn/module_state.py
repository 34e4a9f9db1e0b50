"""Module state beyond parameters: state-dict and load-state-dict hooks, extra state,
set_submodule, and the markers nn.Buffer, nn.UninitializedParameter and
nn.UninitializedBuffer (PyTorch's names and calling conventions).

The hook tables are made on first registration, so modules that never register one carry
none; `Module.state_dict` and `Module.load_state_dict` call the helpers here.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ..tensor import Tensor
from .hooks import RemovableHandle, _check_callable

_STATE_HOOKS = ("_state_dict_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks",
                "_load_state_dict_post_hooks")

EXTRA_STATE_KEY = "_extra_state"


# ---- markers -------------------------------------------------------------------------------------


class _BufferMeta(type):
    # as nn.Parameter: a plain Tensor with a mark (ops require `x.__class__ is Tensor`)
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and getattr(obj, "_buffer_persistent", None) is not None


class Buffer(metaclass=_BufferMeta):
    """A tensor that, assigned to a module attribute, registers itself as a buffer (persistent
    or not). `Buffer(data)` shares data's storage; `isinstance(b, nn.Buffer)` is True.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> m = nn.Module()
        >>> m.count = nn.Buffer(st.zeros(1))
        >>> m.scratch = nn.Buffer(st.zeros(2), persistent=False)
        >>> [n for n, _ in m.named_buffers()], list(m.state_dict())
        (['count', 'scratch'], ['count'])
    """

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Tensor:
        if data is None:
            from .. import creation

            data = creation.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer: data must be a Tensor, got {type(data).__name__}")
        b = data.detach()
        b._buffer_persistent = bool(persistent)
        return b


class _UninitializedMeta(type):
    _kind = ""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, Tensor) and getattr(obj, "_uninitialized_kind", None) == cls._kind
                and obj.numel() == 0)


class _UninitializedParameterMeta(_UninitializedMeta):
    _kind = "parameter"


class _UninitializedBufferMeta(_UninitializedMeta):
    _kind = "buffer"


def _placeholder(kind: str, requires_grad: bool, device, dtype) -> Tensor:
    from .. import creation
    from .module import Parameter

    empty = creation.empty(0, dtype=dtype, device=device)
    t = Parameter(empty, requires_grad) if kind == "parameter" else empty
    t._uninitialized_kind = kind
    return t


class UninitializedParameter(metaclass=_UninitializedParameterMeta):
    """The placeholder a lazy module holds until its first input gives the shape: an empty
    nn.Parameter, for which `isinstance(p, nn.UninitializedParameter)` is True until it
    receives its data.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> fc = nn.LazyLinear(2)
        >>> isinstance(fc.weight, nn.UninitializedParameter)
        True
        >>> _ = fc(st.ones(1, 3)); isinstance(fc.weight, nn.UninitializedParameter)
        False
    """

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> Tensor:
        return _placeholder("parameter", requires_grad, device, dtype)


class UninitializedBuffer(metaclass=_UninitializedBufferMeta):
    """The placeholder of a lazy module's buffer (running statistics) until its first input.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> bn = nn.LazyBatchNorm1d()
        >>> isinstance(bn.running_mean, nn.UninitializedBuffer)
        True
    """

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None) -> Tensor:
        return _placeholder("buffer", requires_grad, device, dtype)


# ---- the Module methods --------------------------------------------------------------------------


def _hooks(module, name: str) -> OrderedDict:
    store = module.__dict__.get(name)
    if store is None:
        if "_parameters" not in module.__dict__:
            raise AttributeError(f"cannot register a hook before Module.__init__() call "
                                 f"({type(module).__name__})")
        store = OrderedDict()
        object.__setattr__(module, name, store)
    return store


def has_extra_state(module) -> bool:
    from .module import Module

    return type(module).get_extra_state is not Module.get_extra_state


class StateHooks:
    """State-dict hooks, extra state and set_submodule (mixed into nn.Module)."""

    def _add_state_hook(self, op: str, store: str, hook, prepend: bool = False):
        _check_callable(op, hook)
        hooks = _hooks(self, store)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, prefix, keep_vars) before state_dict collects this module.

        Example:
            >>> from singa_tensor import nn
            >>> seen = []
            >>> m = nn.Linear(2, 2)
            >>> h = m.register_state_dict_pre_hook(lambda mod, prefix, kv: seen.append(prefix))
            >>> _ = nn.Sequential(m).state_dict(); seen
            ['0.']
        """
        return self._add_state_hook("register_state_dict_pre_hook", "_state_dict_pre_hooks",
                                    hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, state_dict, prefix, local_metadata) after state_dict collected
        this module; the hook may edit state_dict in place and must return None.

        Example:
            >>> from singa_tensor import nn
            >>> m = nn.Linear(2, 2)
            >>> def drop_bias(mod, sd, prefix, meta):
            ...     del sd[prefix + "bias"]
            >>> _ = m.register_state_dict_post_hook(drop_bias)
            >>> list(m.state_dict())
            ['weight']
        """
        return self._add_state_hook("register_state_dict_post_hook", "_state_dict_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs) before load_state_dict reads this module's entries; the
        hook may edit (a copy of) state_dict in place.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Linear(2, 2, bias=False)
            >>> def rename(mod, sd, prefix, *rest):
            ...     if prefix + "w" in sd:
            ...         sd[prefix + "weight"] = sd.pop(prefix + "w")
            >>> _ = m.register_load_state_dict_pre_hook(rename)
            >>> m.load_state_dict({"w": st.ones(2, 2)})
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        return self._add_state_hook("register_load_state_dict_pre_hook",
                                    "_load_state_dict_pre_hooks", hook)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, incompatible_keys) after load_state_dict copied the values; the
        hook may remove entries from incompatible_keys.missing_keys / unexpected_keys, which
        strict loading checks afterwards.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Linear(2, 2)
            >>> def forgive(mod, keys):
            ...     keys.missing_keys.clear()
            >>> _ = m.register_load_state_dict_post_hook(forgive)
            >>> m.load_state_dict({"weight": st.ones(2, 2)})
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        return self._add_state_hook("register_load_state_dict_post_hook",
                                    "_load_state_dict_post_hooks", hook)

    def get_extra_state(self) -> Any:
        """Override (with set_extra_state) to put any picklable value in state_dict under
        "<prefix>_extra_state".

        Example:
            >>> from singa_tensor import nn
            >>> class Counter(nn.Module):
            ...     def __init__(self):
            ...         super().__init__(); self.calls = 3
            ...     def get_extra_state(self):
            ...         return {"calls": self.calls}
            ...     def set_extra_state(self, state):
            ...         self.calls = state["calls"]
            >>> sd = Counter().state_dict(); dict(sd)
            {'_extra_state': {'calls': 3}}
            >>> c = Counter(); c.calls = 0; _ = c.load_state_dict(sd); c.calls
            3
        """
        raise RuntimeError(f"{type(self).__name__}: get_extra_state() is only called for "
                           "modules that override it")

    def set_extra_state(self, state: Any) -> None:
        """Restore what get_extra_state returned (override both together).

        Example:
            >>> from singa_tensor import nn
            >>> nn.Module().set_extra_state({})
            Traceback (most recent call last):
            ...
            RuntimeError: Module: set_extra_state() was called but is not overridden ...
        """
        raise RuntimeError(f"{type(self).__name__}: set_extra_state() was called but is not "
                           "overridden (override it together with get_extra_state)")

    def set_submodule(self, target: str, module, strict: bool = False) -> None:
        """Put module at the dotted path target (its parent must exist); with strict, target
        itself must already be a submodule.

        Example:
            >>> from singa_tensor import nn
            >>> net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU()))
            >>> net.set_submodule("1.0", nn.Tanh()); net[1][0]
            Tanh()
        """
        from .module import Module

        if not isinstance(target, str) or target == "":
            raise ValueError("set_submodule: cannot set the submodule without a target name")
        if not isinstance(module, Module):
            raise TypeError(f"set_submodule: {type(module).__name__} is not a Module")
        *path, name = target.split(".")
        parent = self.get_submodule(".".join(path))
        if strict and not isinstance(parent._modules.get(name), Module):
            raise AttributeError(f"set_submodule: {parent._get_name()} has no submodule "
                                 f"{name!r} (strict=True)")
        if hasattr(parent, name) and name not in parent._modules and not strict:
            existing = getattr(parent, name)
            if not isinstance(existing, Module) and existing is not None:
                raise AttributeError(f"set_submodule: {name!r} of {parent._get_name()} is "
                                     f"not an nn.Module")
        setattr(parent, name, module)


# ---- what state_dict / load_state_dict run ------------------------------------------------------


def run_state_dict_pre_hooks(module, prefix: str, keep_vars: bool) -> None:
    for hook in list(module.__dict__.get("_state_dict_pre_hooks", {}).values()):
        hook(module, prefix, keep_vars)


def run_state_dict_post_hooks(module, destination, prefix: str) -> None:
    for hook in list(module.__dict__.get("_state_dict_hooks", {}).values()):
        if hook(module, destination, prefix, {}) is not None:
            raise RuntimeError("state_dict post hook must return None (edit the state dict "
                               "in place)")


def has_load_pre_hooks(root) -> bool:
    return any(m.__dict__.get("_load_state_dict_pre_hooks") for m in root.modules())


def run_load_pre_hooks(root, state_dict, strict: bool, missing, unexpected, errors) -> None:
    for prefix, m in root.named_modules(prefix=""):
        hooks = m.__dict__.get("_load_state_dict_pre_hooks")
        if hooks:
            p = prefix + "." if prefix else ""
            for hook in list(hooks.values()):
                hook(m, state_dict, p, {}, strict, missing, unexpected, errors)


def extra_state_modules(root) -> dict:
    """Dotted key -> module, for the modules that keep extra state."""
    out = {}
    for prefix, m in root.named_modules(prefix=""):
        if has_extra_state(m):
            out[(prefix + "." if prefix else "") + EXTRA_STATE_KEY] = m
    return out


def has_load_post_hooks(root) -> bool:
    return any(m.__dict__.get("_load_state_dict_post_hooks") for m in root.modules())


def run_load_post_hooks(root, keys) -> None:
    for m in root.modules():
        for hook in list(m.__dict__.get("_load_state_dict_post_hooks", {}).values()):
            if hook(m, keys) is not None:
                raise RuntimeError("load_state_dict post hook must return None (edit "
                                   "incompatible_keys in place)")


__all__ = ["Buffer", "UninitializedBuffer", "UninitializedParameter"]
