"""Module hooks: forward pre-hooks, forward hooks, full backward (pre-)hooks, the global module
hooks, and the handles that remove them (PyTorch's names and calling conventions).

A module with no hook registered (here or globally) is called straight through to `forward`;
the machinery below runs only when some hook exists. Backward hooks wrap the module's tensor
inputs and outputs in identity autograd Functions whose backward calls the hooks: the one on
the outputs sees grad_output first, the one on the inputs then sees grad_input.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict
from typing import Any, Callable

from .. import autograd as _ag
from ..tensor import Tensor

__all__ = [
    "RemovableHandle",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]

_ids = itertools.count()


class RemovableHandle:
    """What a `register_*_hook` call returns: `remove()` takes the hook out again; as a
    context manager, the hook is removed when the block ends.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> seen = []
        >>> m = nn.Identity()
        >>> with m.register_forward_hook(lambda mod, args, out: seen.append(out.shape)):
        ...     _ = m(st.ones(2))
        >>> _ = m(st.ones(3))
        >>> seen
        [(2,)]
    """

    def __init__(self, hooks_dict: OrderedDict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(_ids)
        extras = extra_dict if isinstance(extra_dict, (list, tuple)) else (
            [] if extra_dict is None else [extra_dict])
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self) -> None:
        """Take the hook out (removing it twice is harmless)."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"RemovableHandle(id={self.id})"


_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_always_called: OrderedDict = OrderedDict()
_global_backward_pre_hooks: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()

_HOOK_STORES = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                "_backward_pre_hooks", "_backward_hooks")


def _check_callable(op: str, hook) -> None:
    if not callable(hook):
        raise TypeError(f"{op}: hook must be callable, got {type(hook).__name__}")


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call hook(module, args) before the forward of every module (before its own pre-hooks).

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> names = []
        >>> h = register_module_forward_pre_hook(lambda m, a: names.append(type(m).__name__))
        >>> _ = nn.Sequential(nn.ReLU())(st.ones(1)); h.remove()
        >>> names
        ['Sequential', 'ReLU']
    """
    _check_callable("register_module_forward_pre_hook", hook)
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook: Callable, *, always_call: bool = False
                                 ) -> RemovableHandle:
    """Call hook(module, args, output) after the forward of every module (before its own
    forward hooks); a non-None return value replaces the output.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> h = register_module_forward_hook(lambda m, a, out: out * 2)
        >>> nn.Identity()(st.ones(1)).tolist(); h.remove()
        [2.0]
    """
    _check_callable("register_module_forward_hook", hook)
    handle = RemovableHandle(_global_forward_hooks,
                             extra_dict=_global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """Call hook(module, grad_output) in the backward of every module (before its own
    backward pre-hooks); a non-None result replaces grad_output.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> seen = []
        >>> h = register_module_full_backward_pre_hook(lambda m, go: seen.append(go[0].shape))
        >>> nn.Identity()(st.ones(2, requires_grad=True)).sum().backward(); h.remove()
        >>> seen
        [(2,)]
    """
    _check_callable("register_module_full_backward_pre_hook", hook)
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """Call hook(module, grad_input, grad_output) in the backward of every module (before its
    own backward hooks); a non-None result replaces grad_input.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> h = register_module_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
        >>> x = st.ones(2, requires_grad=True)
        >>> nn.Identity()(x).sum().backward(); h.remove()
        >>> x.grad.tolist()
        [0.0, 0.0]
    """
    _check_callable("register_module_full_backward_hook", hook)
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


def init_hooks(module) -> None:
    """Give a new module its (empty) hook tables."""
    for name in _HOOK_STORES:
        object.__setattr__(module, name, OrderedDict())


def has_hooks(module) -> bool:
    """Whether calling module must go through `call_with_hooks`."""
    if (_global_forward_hooks or _global_forward_pre_hooks or _global_backward_hooks
            or _global_backward_pre_hooks):
        return True
    d = module.__dict__
    return bool(d.get("_forward_pre_hooks") or d.get("_forward_hooks")
                or d.get("_backward_hooks") or d.get("_backward_pre_hooks"))


class ModuleHooks:
    """The hook-registering methods of nn.Module (mixed into it)."""

    def _hook_store(self, name: str) -> OrderedDict:
        store = self.__dict__.get(name)
        if store is None:
            raise AttributeError(f"cannot register a hook before Module.__init__() call "
                                 f"({type(self).__name__})")
        return store

    def _add_hook(self, op: str, store: str, hook, prepend: bool, flags: dict) -> RemovableHandle:
        _check_callable(op, hook)
        hooks = self._hook_store(store)
        extras = [self._hook_store(f) for f in flags]
        handle = RemovableHandle(hooks, extra_dict=extras)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        for f, on in flags.items():
            if on:
                self._hook_store(f)[handle.id] = True
        return handle

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call hook(module, args) (or hook(module, args, kwargs) with with_kwargs) before
        forward. A non-None result replaces args (a single value becomes a 1-tuple); with
        with_kwargs it must be an (args, kwargs) pair.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Identity()
            >>> _ = m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
            >>> m(st.zeros(2)).tolist()
            [1.0, 1.0]
        """
        return self._add_hook("register_forward_pre_hook", "_forward_pre_hooks", hook, prepend,
                              {"_forward_pre_hooks_with_kwargs": with_kwargs})

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False, always_call: bool = False
                              ) -> RemovableHandle:
        """Call hook(module, args, output) (or hook(module, args, kwargs, output) with
        with_kwargs) after forward; a non-None result replaces the output. With always_call
        the hook also runs when forward raises (with output None).

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Identity()
            >>> _ = m.register_forward_hook(lambda mod, args, out: out * 3)
            >>> m(st.ones(1)).tolist()
            [3.0]
        """
        return self._add_hook("register_forward_hook", "_forward_hooks", hook, prepend,
                              {"_forward_hooks_with_kwargs": with_kwargs,
                               "_forward_hooks_always_called": always_call})

    def register_full_backward_pre_hook(self, hook: Callable, *, prepend: bool = False
                                        ) -> RemovableHandle:
        """Call hook(module, grad_output) when the gradients of the module's outputs are
        known; a non-None result (a tuple like grad_output) replaces them.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Identity()
            >>> _ = m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
            >>> x = st.ones(2, requires_grad=True)
            >>> m(x).sum().backward(); x.grad.tolist()
            [2.0, 2.0]
        """
        return self._add_hook("register_full_backward_pre_hook", "_backward_pre_hooks", hook,
                              prepend, {})

    def register_full_backward_hook(self, hook: Callable, *, prepend: bool = False
                                    ) -> RemovableHandle:
        """Call hook(module, grad_input, grad_output) once the gradients of the module's
        positional tensor inputs are computed (None for inputs that need none); a non-None
        result replaces grad_input.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Linear(2, 1)
            >>> shapes = []
            >>> _ = m.register_full_backward_hook(
            ...     lambda mod, gi, go: shapes.append((gi[0].shape, go[0].shape)))
            >>> m(st.ones(3, 2, requires_grad=True)).sum().backward()
            >>> shapes
            [((3, 2), (3, 1))]
        """
        return self._add_hook("register_full_backward_hook", "_backward_hooks", hook, prepend,
                              {})

    def _call_with_hooks(self, args: tuple, kwargs: dict) -> Any:
        return call_with_hooks(self, args, kwargs)


# ---- calling a module with its hooks -----------------------------------------------------------


def _run_pre_hooks(module, hooks, with_kwargs: set, args: tuple, kwargs: dict):
    for hook_id, hook in hooks:
        if hook_id in with_kwargs:
            res = hook(module, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                        f"but got {res!r}")
                args, kwargs = res
                args = args if isinstance(args, tuple) else (args,)
        else:
            res = hook(module, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
    return args, kwargs


def call_with_hooks(module, args: tuple, kwargs: dict) -> Any:
    """Run module.forward(*args, **kwargs) surrounded by its hooks and the global ones."""
    d = {name: module.__dict__.get(name) or {} for name in _HOOK_STORES}
    pre = list(_global_forward_pre_hooks.items()) + list(d["_forward_pre_hooks"].items())
    args, kwargs = _run_pre_hooks(module, pre, set(d["_forward_pre_hooks_with_kwargs"]),
                                  args, kwargs)
    backward = None
    if (d["_backward_hooks"] or d["_backward_pre_hooks"] or _global_backward_hooks
            or _global_backward_pre_hooks) and _ag.is_grad_enabled():
        backward = _BackwardHooks(module, list(_global_backward_pre_hooks.values())
                                  + list(d["_backward_pre_hooks"].values()),
                                  list(_global_backward_hooks.values())
                                  + list(d["_backward_hooks"].values()))
        args = backward.wrap_inputs(args)
    hooks = list(_global_forward_hooks.items()) + list(d["_forward_hooks"].items())
    always = set(_global_forward_hooks_always_called) | set(d["_forward_hooks_always_called"])
    with_kwargs = set(d["_forward_hooks_with_kwargs"])
    try:
        result = module.forward(*args, **kwargs)
    except BaseException:
        for hook_id, hook in hooks:
            if hook_id in always:
                try:
                    hook(module, args, kwargs, None) if hook_id in with_kwargs \
                        else hook(module, args, None)
                except Exception as e:  # noqa: BLE001 - the forward's error is the one raised
                    warnings.warn(f"forward hook with always_call=True raised an exception that "
                                  f"was silenced as another error was raised in forward: {e}",
                                  stacklevel=2)
        raise
    for hook_id, hook in hooks:
        res = (hook(module, args, kwargs, result) if hook_id in with_kwargs
               else hook(module, args, result))
        if res is not None:
            result = res
    if backward is not None:
        result = backward.wrap_outputs(result)
    return result


class _BackwardHooks:
    """One call's link between the module's backward hooks and the autograd graph."""

    def __init__(self, module, pre_hooks: list, hooks: list) -> None:
        # the hooks registered when the module was called (as PyTorch takes them)
        self.module = module
        self.pre_hooks, self.hooks = pre_hooks, hooks
        self.n_inputs = 0
        self.input_positions: list[int] = []
        self.grad_output: tuple | None = None

    def wrap_inputs(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        self.input_positions = [i for i, a in enumerate(args)
                                if isinstance(a, Tensor) and a.requires_grad]
        if not self.input_positions:
            return args
        wrapped = _InputHook.apply(self, *(args[i] for i in self.input_positions))
        out = list(args)
        for i, t in zip(self.input_positions, wrapped):
            out[i] = t
        return tuple(out)

    def wrap_outputs(self, result):
        outs = result if isinstance(result, (tuple, list)) else (result,)
        self.n_outputs = len(outs)
        self.output_positions = [i for i, o in enumerate(outs)
                                 if isinstance(o, Tensor) and o.requires_grad]
        if not self.output_positions:
            return result
        wrapped = _OutputHook.apply(self, *(outs[i] for i in self.output_positions))
        new = list(outs)
        for i, t in zip(self.output_positions, wrapped):
            new[i] = t
        if isinstance(result, (tuple, list)):
            return type(result)(new)
        return new[0]

    @staticmethod
    def _pack(positions: list[int], grads, n: int) -> tuple:
        out: list = [None] * n
        for i, g in zip(positions, grads):
            out[i] = g
        return tuple(out)

    @staticmethod
    def _check(what: str, res, expected: int) -> tuple:
        if not isinstance(res, (tuple, list)) or len(res) != expected:
            raise RuntimeError(f"backward hook returned an invalid number of {what} gradients: "
                               f"expected a tuple of {expected}, got {res!r}")
        return tuple(res)

    def on_grad_output(self, grads: tuple) -> tuple:
        mod = self.module
        grad_output = self._pack(self.output_positions, grads, self.n_outputs)
        for hook in self.pre_hooks:
            res = hook(mod, grad_output)
            if res is not None:
                grad_output = self._check("output", res, self.n_outputs)
        self.grad_output = grad_output
        if not self.input_positions:  # no input needs a gradient: the hooks see only Nones
            for hook in self.hooks:
                if hook(mod, (None,) * self.n_inputs, grad_output) is not None:
                    raise RuntimeError("backward hook returned a grad_input although no input "
                                       "of the module requires grad")
        return tuple(grad_output[i] for i in self.output_positions)

    def on_grad_input(self, grads: tuple) -> tuple:
        mod = self.module
        grad_input = self._pack(self.input_positions, grads, self.n_inputs)
        for hook in self.hooks:
            res = hook(mod, grad_input, self.grad_output)
            if res is not None:
                grad_input = self._check("input", res, self.n_inputs)
        return tuple(grad_input[i] for i in self.input_positions)


class _InputHook(_ag.Function):
    @staticmethod
    def forward(ctx, state, *xs):
        ctx.state = state
        return xs

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.on_grad_input(grads))


class _OutputHook(_ag.Function):
    @staticmethod
    def forward(ctx, state, *xs):
        ctx.state = state
        return xs

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.on_grad_output(grads))
