"""Containers of modules: Sequential, ModuleList, ModuleDict."""

from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Iterable, Iterator, Mapping

from .module import Module


def _index(op: str, idx, n: int) -> int:
    try:
        i = operator.index(idx)
    except TypeError:
        raise TypeError(f"{op}: indices must be integers or slices, not "
                        f"{type(idx).__name__}") from None
    if not -n <= i < n:
        raise IndexError(f"{op}: index {i} is out of range for {n} modules")
    return i % n


class Sequential(Module):
    """Modules applied one after another; built from modules or from an OrderedDict of named
    modules.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import nn
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> net(st.ones(3, 4)).shape, len(net), type(net[1]).__name__
        ((3, 2), 3, 'ReLU')
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index("Sequential", idx, len(keys))]]

    def __setitem__(self, idx, module: Module) -> None:
        keys = list(self._modules)
        self.add_module(keys[_index("Sequential", idx, len(keys))], module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_index("Sequential", idx, len(keys))]]
        # keep integer names contiguous, as a fresh Sequential of the survivors would have
        if all(k.isdigit() for k in keys):
            items = list(self._modules.values())
            self._modules.clear()
            for i, m in enumerate(items):
                self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} is out of range for {n} modules")
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self


class ModuleList(Module):
    """A list of modules whose parameters belong to the owner (a plain list's would not).

    Example:
        >>> from singa_tensor import nn
        >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
        >>> len(layers), len(list(layers.parameters()))
        (3, 6)
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _renumber(self, items: list) -> None:
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index("ModuleList", idx, len(self)))]

    def __setitem__(self, idx, module: Module) -> None:
        self.add_module(str(_index("ModuleList", idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index("ModuleList", idx, len(items))]
        self._renumber(items)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable of modules, "
                            f"but got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward: iterate over its modules")


class ModuleDict(Module):
    """A dict of modules (insertion ordered) whose parameters belong to the owner.

    Example:
        >>> from singa_tensor import nn
        >>> heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 4)})
        >>> list(heads), heads["cls"].out_features
        (['cls', 'box'], 3)
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        if key not in self._modules:
            raise KeyError(f"ModuleDict has no module '{key}'")
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self._modules[key]
        return m

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        pairs = modules.items() if hasattr(modules, "items") else modules
        for pair in pairs:
            if len(pair) != 2:
                raise ValueError("ModuleDict.update: expected (name, module) pairs, got an "
                                 f"element of length {len(pair)}")
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward: index it by name")


__all__ = ["ModuleDict", "ModuleList", "Sequential"]
