"""Parameter and Module: the building blocks of models.

A Module owns parameters, buffers and child modules, registered by plain attribute assignment.
Names are dotted paths (`block.0.weight`), which is what `state_dict` and optimizers see.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

from .. import autograd as _ag
from .. import backend as _backend
from .. import dtype as _dt
from ..tensor import Tensor
from . import hooks as _hooks
from . import module_state as _state

# ---- Parameter ---------------------------------------------------------------------------------


class _ParameterMeta(type):
    # Ops test `x.__class__ is Tensor` in their fast paths and when recording the graph, so a
    # Tensor subclass would be rejected or silently not differentiated. A parameter is therefore
    # a plain Tensor carrying a mark, and `isinstance(t, Parameter)` reads the mark.
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and getattr(obj, "_is_param", False) is True


class Parameter(metaclass=_ParameterMeta):
    """A tensor that is a trainable parameter of a Module: assigning one to a module attribute
    registers it. `Parameter(data)` shares data's storage and is a leaf requiring grad.

    `Parameter(...)` returns an `st.Tensor` (so every op accepts it) for which
    `isinstance(p, nn.Parameter)` is True.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> p = nn.Parameter(st.zeros(2))
        >>> isinstance(p, nn.Parameter), isinstance(p, st.Tensor), p.requires_grad, p.is_leaf
        (True, True, True, True)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Tensor:
        if data is None:
            from .. import creation

            data = creation.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        if requires_grad and not data.dtype.is_floating_point:
            raise RuntimeError(
                f"Parameter: only floating point tensors can require gradients, got "
                f"{data.dtype.name}; pass requires_grad=False"
            )
        p = data.detach()
        p._is_param = True
        p.requires_grad = bool(requires_grad)
        return p


def _set_data(t: Tensor, new: Tensor) -> None:
    """Make t show new's data (shape, dtype, device may change) while keeping t's identity, so
    optimizers and other holders of t see the converted parameter."""
    t.data = new


# ---- Module ------------------------------------------------------------------------------------

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _check_name(kind: str, name, owner: Module) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if not name:
        raise KeyError(f'{kind} name cannot be an empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name cannot contain ".", got "{name}"')
    if hasattr(owner, name) and not any(
        name in d for d in (owner._parameters, owner._buffers, owner._modules)
    ):
        raise KeyError(f'attribute "{name}" already exists')


def _add_indent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module(_hooks.ModuleHooks, _state.StateHooks):
    """Base class of all layers and models: subclass it, assign layers and parameters in
    `__init__`, and compute the output in `forward`.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> class Net(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = nn.Linear(3, 2)
        ...     def forward(self, x):
        ...         return self.fc(x).relu()
        >>> net = Net()
        >>> [name for name, _ in net.named_parameters()]
        ['fc.weight', 'fc.bias']
        >>> net(st.ones(4, 3)).shape
        (4, 2)
    """

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        _hooks.init_hooks(self)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _hooks.has_hooks(self):
            return _hooks.call_with_hooks(self, args, kwargs)
        compiled = self.__dict__.get("_compiled_forward")
        if compiled is not None and not kwargs and not _ag.is_grad_enabled():
            return compiled(self.training, *args)
        return self.forward(*args, **kwargs)

    def compile(self, **options) -> None:
        """Run this module's forward in graph mode where nothing needs gradients (PyTorch's
        `Module.compile`, compiling in place): calls under `no_grad()` or `inference_mode()`
        are recorded once per input signature (shapes, dtypes, devices, train/eval mode) and
        then replayed; calls that record gradients run eagerly, as before, so training is
        unchanged (compile the whole training step with `st.compile(step)` to replay it).
        Options are those of `st.compile`; keyword arguments to the module run eagerly.

        Example:
            >>> import singa_tensor as st
            >>> net = st.nn.Sequential(st.nn.Linear(4, 3), st.nn.ReLU()).eval()
            >>> net.compile()
            >>> with st.inference_mode():
            ...     ys = [net(st.ones(2, 4)) for _ in range(3)]  # eager, recorded, replayed
            >>> ys[2].shape, bool((ys[2] == ys[0]).all())
            ((2, 3), True)
        """
        from ..graph import CompiledStep  # graph mode is a layer above nn: a run-time call up

        forward = self.forward
        object.__setattr__(self, "_compiled_forward",
                           CompiledStep(lambda training, *args: forward(*args), **options))
        object.__setattr__(self, "_compile_options", dict(options))

    def __getstate__(self) -> dict:
        # a compiled forward's recordings point at this module's memory: a copy leaves them
        # behind and is compiled afresh (__setstate__), recording its own on first use
        state = self.__dict__.copy()
        state.pop("_compiled_forward", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        options = state.get("_compile_options")
        if options is not None:
            self.compile(**options)

    # ---- registration ----------------------------------------------------------------------
    def _require_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Add a parameter (or None, a declared-but-absent one such as a missing bias)."""
        self._require_init("parameters")
        _check_name("parameter", name, self)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (e.g. running statistics); a
        persistent buffer is part of `state_dict`.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Module()
            >>> m.register_buffer("count", st.zeros(1))
            >>> list(m.state_dict())
            ['count']
        """
        self._require_init("buffers")
        _check_name("buffer", name, self)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under name."""
        self._require_init("modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name, self)
        self._modules[name] = module

    register_module = add_module

    def _forget(self, name: str, keep: str = "") -> None:
        """Drop name from every store except keep, whose entry is about to be replaced in
        place (so that a reassigned child or parameter keeps its position, as in PyTorch)."""
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                getattr(self, store).pop(name, None)
        if keep != "_buffers":
            self._non_persistent_buffers.discard(name)

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._require_init("parameters")
            self._forget(name, keep="_parameters")
            self._parameters[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, _state.Buffer):  # nn.Buffer: registers itself
            self._require_init("buffers")
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, value._buffer_persistent)
        elif isinstance(value, Module):
            self._require_init("modules")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(nn.Module or None expected)"
                )
            self._modules[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        # only called when normal lookup fails: parameters, buffers and children live in dicts
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    def get_submodule(self, target: str) -> Module:
        """The module at a dotted path ("" is self).

        Example:
            >>> from singa_tensor import nn
            >>> nn.Sequential(nn.Linear(2, 2), nn.ReLU()).get_submodule("1")
            ReLU()
        """
        if not isinstance(target, str):
            raise TypeError(f"get_submodule(): target must be a str, got {type(target).__name__}")
        mod = self
        if not target:
            return mod
        for part in target.split("."):
            if part not in mod._modules:
                if hasattr(mod, part):
                    raise AttributeError(f"get_submodule(): `{part}` is not an nn.Module "
                                         f"(looking up '{target}')")
                raise AttributeError(f"get_submodule(): {mod._get_name()} has no attribute "
                                     f"`{part}` (looking up '{target}')")
            sub = mod._modules[part]
            if sub is None:
                raise AttributeError(f"get_submodule(): `{part}` is None, not an nn.Module "
                                     f"(looking up '{target}')")
            mod = sub
        return mod

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at a dotted path such as "0.weight".

        Example:
            >>> from singa_tensor import nn
            >>> nn.Sequential(nn.Linear(2, 3)).get_parameter("0.bias").shape
            (3,)
        """
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            if hasattr(mod, name):
                raise AttributeError(f"get_parameter(): `{name}` is not an nn.Parameter "
                                     f"(looking up '{target}')")
            raise AttributeError(f"get_parameter(): {mod._get_name()} has no attribute "
                                 f"`{name}` (looking up '{target}')")
        if mod._parameters[name] is None:
            raise AttributeError(f"get_parameter(): `{name}` is None, not an nn.Parameter "
                                 f"(looking up '{target}')")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at a dotted path such as "0.running_mean".

        Example:
            >>> from singa_tensor import nn
            >>> nn.Sequential(nn.BatchNorm1d(3)).get_buffer("0.running_var").tolist()
            [1.0, 1.0, 1.0]
        """
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            if hasattr(mod, name):
                raise AttributeError(f"get_buffer(): `{name}` is not a buffer "
                                     f"(looking up '{target}')")
            raise AttributeError(f"get_buffer(): {mod._get_name()} has no attribute `{name}` "
                                 f"(looking up '{target}')")
        if mod._buffers[name] is None:
            raise AttributeError(f"get_buffer(): `{name}` is None, not a buffer "
                                 f"(looking up '{target}')")
        return mod._buffers[name]

    # ---- iteration -------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for self and every descendant: each module once unless
        remove_duplicate=False; modules whose id is in memo are skipped; names start with
        prefix.

        Example:
            >>> from singa_tensor import nn
            >>> [n for n, _ in nn.Sequential(nn.Linear(2, 2)).named_modules(prefix="net")]
            ['net', 'net.0']
        """
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from child.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        seen = set()
        mods = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse
                else [(prefix, self)])
        for mod_prefix, mod in mods:
            for name, t in getattr(mod, store).items():
                if t is None:
                    continue
                if remove_duplicate:
                    if id(t) in seen:
                        continue
                    seen.add(id(t))
                yield mod_prefix + ("." if mod_prefix else "") + name, t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, parameter) pairs; a parameter shared by several modules comes once,
        under its first name."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes and gradients ---------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and every descendant (dropout, batch norm ...)."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(): mode is expected to be a bool, got {type(mode).__name__}")
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> Module:
        """Evaluation mode: the same as `train(False)`."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set requires_grad on every parameter (e.g. False to freeze a layer); returns self.

        Example:
            >>> from singa_tensor import nn
            >>> [p.requires_grad for p in nn.Linear(2, 2).requires_grad_(False).parameters()]
            [False, False]
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of all parameters: drop them (set_to_none, the default) or
        zero them in place.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Linear(2, 1)
            >>> m(st.ones(1, 2)).sum().backward()
            >>> m.zero_grad(set_to_none=False); m.bias.grad.tolist()
            [0.0]
            >>> m.zero_grad(); m.bias.grad is None
            True
        """
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad.detach()
                with _ag.no_grad():
                    g.zero_()
                p.grad = g

    # ---- conversion ------------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's data (keeping the Parameter object) and every buffer by
        fn(tensor); used by `to`, `double`, `cpu` ..."""
        for child in self.children():
            child._apply(fn)
        with _ag.no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    _set_data(p, new)
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        p.grad = g
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args, dtype=None, device=None) -> Module:
        """Move and/or cast parameters and buffers in place; a dtype only applies to floating
        point tensors (integer buffers such as counters keep their type).

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> m = nn.Linear(2, 2)
            >>> w = m.weight
            >>> m.to(st.float64).weight is w, w.dtype
            (True, singa_tensor.float64)
        """
        for a in args:
            if isinstance(a, _dt.DType):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, str) and a in _dt._NAMES:
                dtype = _dt._NAMES[a]
            elif isinstance(a, (str, _backend.Device)):
                device = a
            else:
                raise TypeError(f"to(): expected a device or dtype, got {a!r}")
        if dtype is not None:
            dtype = _dt.as_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(f"to(): nn.Module.to only accepts floating point dtypes, but "
                                f"got desired dtype={dtype.name}")
        if device is not None:
            device = _backend.as_device(device)

        def convert(t: Tensor) -> Tensor:
            return t.to(dtype=dtype if t.dtype.is_floating_point else None, device=device)

        return self._apply(convert)

    def _cast_floats(self, dtype) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.dtype.is_floating_point else t)

    def float(self) -> Module:
        return self._cast_floats(_dt.float32)

    def double(self) -> Module:
        return self._cast_floats(_dt.float64)

    def half(self) -> Module:
        return self._cast_floats(_dt.float16)

    def bfloat16(self) -> Module:
        return self._cast_floats(_dt.bfloat16)

    def type(self, dst_type) -> Module:
        """Cast every parameter and buffer (integer ones included) to dst_type.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> nn.Linear(2, 2).type(st.float64).weight.dtype
            singa_tensor.float64
        """
        if isinstance(dst_type, str) and dst_type in _dt._NAMES:
            dst_type = _dt._NAMES[dst_type]
        if not isinstance(dst_type, _dt.DType):
            raise TypeError(f"Module.type(): dst_type must be a dtype, got {dst_type!r}")
        return self._apply(lambda t: t.to(dst_type))

    def cpu(self) -> Module:
        return self.to(device="cpu")

    def cuda(self, device=None) -> Module:
        return self.to(device=device if device is not None else "cuda")

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call fn on every descendant, then on self (e.g. custom initialisation).

        Example:
            >>> from singa_tensor import nn
            >>> names = []
            >>> _ = nn.Sequential(nn.Linear(2, 2)).apply(lambda m: names.append(type(m).__name__))
            >>> names
            ['Linear', 'Sequential']
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- state dict ------------------------------------------------------------------------
    def _own_state(self, keep_vars: bool):
        for name, p in self._parameters.items():
            if p is not None:
                yield name, p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                yield name, b if keep_vars else b.detach()

    def state_dict(self, destination=None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:
        """Parameters and persistent buffers by dotted name (tensors sharing the module's data,
        detached unless keep_vars).

        Example:
            >>> from singa_tensor import nn
            >>> list(nn.Sequential(nn.Linear(2, 3)).state_dict())
            ['0.weight', '0.bias']
        """
        if destination is None:
            destination = OrderedDict()
        _state.run_state_dict_pre_hooks(self, prefix, keep_vars)
        for name, t in self._own_state(keep_vars):
            destination[prefix + name] = t
        if _state.has_extra_state(self):
            destination[prefix + _state.EXTRA_STATE_KEY] = self.get_extra_state()
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination, prefix + name + ".", keep_vars)
        _state.run_state_dict_post_hooks(self, destination, prefix)
        return destination

    def _expected_state(self, prefix: str = "", out: dict | None = None) -> dict:
        """Dotted name -> the module's tensor (not detached: it is written to)."""
        out = {} if out is None else out
        for name, t in self._own_state(keep_vars=True):
            out[prefix + name] = t
        for name, child in self._modules.items():
            if child is not None:
                child._expected_state(prefix + name + ".", out)
        return out

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copy values from state_dict into this module's parameters and buffers.

        With strict, missing and unexpected keys are an error; either way a shape mismatch
        is, and nothing is copied unless every entry fits. Returns
        `(missing_keys, unexpected_keys)`.

        Example:
            >>> import singa_tensor as st
            >>> from singa_tensor import nn
            >>> a, b = nn.Linear(2, 2), nn.Linear(2, 2)
            >>> b.load_state_dict(a.state_dict())
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
            >>> bool((a.weight == b.weight).all())
            True
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"load_state_dict(): expected a mapping, got "
                            f"{type(state_dict).__name__}")
        missing: list = []
        unexpected: list = []
        errors: list = []
        if _state.has_load_pre_hooks(self):
            state_dict = OrderedDict(state_dict)  # the hooks edit a copy, not the caller's
            _state.run_load_pre_hooks(self, state_dict, strict, missing, unexpected, errors)
        expected = self._expected_state()
        extra = _state.extra_state_modules(self)
        missing += [k for k in list(expected) + list(extra) if k not in state_dict]
        unexpected += [k for k in state_dict.keys() if k not in expected and k not in extra]
        pairs = []
        for key, target in expected.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                try:
                    from .. import creation

                    value = creation.tensor(value, dtype=target.dtype, device=target.device)
                except (TypeError, ValueError):
                    errors.append(f'While copying the parameter named "{key}", expected a '
                                  f"Tensor from checkpoint but received {type(value).__name__}")
                    continue
            if value.shape != target.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{tuple(value.shape)} from checkpoint, the shape in current "
                              f"model is {tuple(target.shape)}.")
                continue
            pairs.append((target, value))
        post_hooks = _state.has_load_post_hooks(self)
        if post_hooks and not errors:  # the hooks see the loaded values, then strict checks
            self._copy_state(pairs, extra, state_dict)
            _state.run_load_post_hooks(self, _IncompatibleKeys(missing, unexpected))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        if not post_hooks:
            self._copy_state(pairs, extra, state_dict)
        return _IncompatibleKeys(missing, unexpected)

    @staticmethod
    def _copy_state(pairs, extra: dict, state_dict) -> None:
        with _ag.no_grad():
            for target, value in pairs:
                target.copy_(value)
        for key, module in extra.items():
            if key in state_dict:
                module.set_extra_state(state_dict[key])

    # ---- printing --------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The layer's settings shown inside its repr, e.g. `in_features=2, out_features=3`;
        subclasses override it.

        Example:
            >>> from singa_tensor import nn
            >>> nn.Linear(2, 3).extra_repr()
            'in_features=2, out_features=3, bias=True'
        """
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, child in self._modules.items():
            lines.append(f"({name}): " + _add_indent(repr(child), 2))
        if not lines:
            return self._get_name() + "()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


__all__ = ["Module", "Parameter"]
