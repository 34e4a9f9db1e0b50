"""Auto-wrap policies for `FullyShardedDataParallel` (PyTorch's `torch.distributed.fsdp.wrap`
names and calling convention).

A policy is called as `policy(module=m, recurse=..., nonwrapped_numel=n)`: with `recurse=True`
it answers whether to look inside m for submodules to wrap, with `recurse=False` whether to
wrap m itself, where n counts m's parameters not already inside a wrapped submodule. The
walk goes bottom-up, so inner blocks become units before the modules that hold them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...nn.containers import ModuleDict, ModuleList
from ...nn.module import Module
from ...nn.transformer import MultiheadAttention

# PyTorch's defaults for size_based_auto_wrap_policy: containers are never units of their own
# (their children are), and attention is wrapped whole, never split into its projections
EXCLUDE_WRAP_MODULES = {ModuleList, ModuleDict}
FORCE_LEAF_MODULES = {MultiheadAttention}


def _classes(name: str, classes) -> tuple:
    if isinstance(classes, type):
        classes = {classes}
    try:
        out = tuple(classes)
    except TypeError:
        raise TypeError(f"{name}: expected a set of nn.Module classes, got {classes!r}") from None
    for c in out:
        if not (isinstance(c, type) and issubclass(c, Module)):
            raise TypeError(f"{name}: {c!r} is not an nn.Module class")
    return out


class ModuleWrapPolicy:
    """Wrap every submodule that is an instance of one of `module_classes` as its own unit.

    Example:
        >>> from singa_tensor import nn
        >>> policy = ModuleWrapPolicy({nn.Linear})
        >>> policy(module=nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
        True
        >>> policy(module=nn.ReLU(), recurse=False, nonwrapped_numel=0)
        False
    """

    def __init__(self, module_classes: Iterable[type]) -> None:
        self._module_classes = _classes("ModuleWrapPolicy", module_classes)

    def __call__(self, module: Module, recurse: bool, nonwrapped_numel: int = 0) -> bool:
        return True if recurse else isinstance(module, self._module_classes)

    def __repr__(self) -> str:
        names = ", ".join(sorted(c.__name__ for c in self._module_classes))
        return f"ModuleWrapPolicy({{{names}}})"


def size_based_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int,
                                min_num_params: int = int(1e8),
                                force_leaf_modules: set | None = None,
                                exclude_wrap_modules: set | None = None) -> bool:
    """Wrap a module once its parameters not yet in a unit number at least `min_num_params`
    (pass it with `functools.partial`). Modules of `force_leaf_modules` (default:
    MultiheadAttention) are not looked into; those of `exclude_wrap_modules` (default:
    ModuleList, ModuleDict) are never units themselves.

    Example:
        >>> import functools
        >>> from singa_tensor import nn
        >>> policy = functools.partial(size_based_auto_wrap_policy, min_num_params=100)
        >>> policy(module=nn.Linear(10, 10), recurse=False, nonwrapped_numel=110)
        True
        >>> policy(module=nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
        False
    """
    leaf = tuple(FORCE_LEAF_MODULES if force_leaf_modules is None else force_leaf_modules)
    exclude = tuple(EXCLUDE_WRAP_MODULES if exclude_wrap_modules is None
                    else exclude_wrap_modules)
    large = nonwrapped_numel >= min_num_params
    if recurse:
        return large and not isinstance(module, leaf)
    return large and not isinstance(module, exclude)


def transformer_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int,
                                 transformer_layer_cls: Iterable[type]) -> bool:
    """Wrap every instance of `transformer_layer_cls` (a set of layer classes, passed with
    `functools.partial`): one unit per transformer block.

    Example:
        >>> import functools
        >>> from singa_tensor import nn
        >>> policy = functools.partial(transformer_auto_wrap_policy,
        ...                            transformer_layer_cls={nn.TransformerEncoderLayer})
        >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
        >>> policy(module=layer, recurse=False, nonwrapped_numel=0)
        True
    """
    classes = _classes("transformer_auto_wrap_policy", transformer_layer_cls)
    return True if recurse else isinstance(module, classes)


def lambda_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int,
                            lambda_fn: Callable[[Module], bool]) -> bool:
    """Wrap the modules for which `lambda_fn(module)` is true (passed with `functools.partial`).

    Example:
        >>> import functools
        >>> from singa_tensor import nn
        >>> policy = functools.partial(lambda_auto_wrap_policy,
        ...                            lambda_fn=lambda m: isinstance(m, nn.Linear))
        >>> policy(module=nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
        True
    """
    return True if recurse else bool(lambda_fn(module))


def _nonwrapped_numel(module: Module) -> int:
    return sum(p.numel() for p in module.parameters())


def recursive_wrap(module: Module, policy: Callable, wrap: Callable[[Module], Module],
                   only_wrap_children: bool = False) -> tuple[Module, int]:
    """Wrap the submodules of module that policy picks, bottom-up (children are replaced in
    their parents by wrap(child)); (the module or its wrapper, parameters now inside units)."""
    numel = _nonwrapped_numel(module)
    if not _ask(policy, module, True, numel):
        return module, 0
    wrapped = 0
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        new, n = recursive_wrap(child, policy, wrap)
        if new is not child:
            module._modules[name] = new
        wrapped += n
    if not only_wrap_children and _ask(policy, module, False, numel - wrapped):
        return wrap(module), numel
    return module, wrapped


def _ask(policy: Callable, module: Module, recurse: bool, numel: int) -> bool:
    return bool(policy(module=module, recurse=recurse, nonwrapped_numel=numel))


__all__ = ["ModuleWrapPolicy", "lambda_auto_wrap_policy", "size_based_auto_wrap_policy",
           "transformer_auto_wrap_policy"]
