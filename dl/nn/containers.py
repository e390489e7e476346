"""Containers: Sequential, ModuleList, ModuleDict (PyTorch's indexing, slicing and editing)."""
from __future__ import annotations

import operator
from collections import OrderedDict

from .module import Module


def _index(n: int, i) -> int:
    i = operator.index(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range")
    return i % n


class Sequential(Module):
    """Modules applied in order: `Sequential(a, b)(x)` is `b(a(x))`. Indexable (a slice
    gives a Sequential), iterable; submodules are named "0", "1", ..., or by the keys of an
    OrderedDict given alone."""
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for k, m in modules[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        """Passes x through each module in turn."""
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return list(self._modules.values())[_index(len(self), i)]

    def __setitem__(self, i, m: Module) -> None:
        key = list(self._modules)[_index(len(self), i)]
        self.add_module(key, m)

    def __delitem__(self, i) -> None:
        keys = list(self._modules)
        for k in (keys[i] if isinstance(i, slice) else [keys[_index(len(keys), i)]]):
            del self._modules[k]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, m: Module) -> Sequential:
        """Adds m at the end; returns self."""
        self.add_module(str(len(self._modules)), m)
        return self


class ModuleList(Module):
    """A list of submodules (registered, so their parameters are the module's), named
    "0", "1", ...: indexing (negative too; a slice gives a ModuleList), assignment,
    deletion (renumbering), append, extend, insert, pop, `+` and `+=`, as PyTorch's. It has
    no forward of its own."""
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _renumber(self, mods) -> None:
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def append(self, m: Module) -> ModuleList:
        """Adds m at the end; returns self."""
        self.add_module(str(len(self._modules)), m)
        return self

    def extend(self, modules) -> ModuleList:
        """Appends each module of an iterable; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, m: Module) -> None:
        """Inserts m before position index."""
        mods = list(self._modules.values())
        mods.insert(index, m)
        self._renumber(mods)

    def pop(self, index: int = -1) -> Module:
        """Removes and returns the module at index."""
        m = self[index]
        del self[index]
        return m

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(mods[i])
        return mods[_index(len(mods), i)]

    def __setitem__(self, i, m: Module) -> None:
        self.add_module(str(_index(len(self), i)), m)

    def __delitem__(self, i) -> None:
        mods = list(self._modules.values())
        if isinstance(i, slice):
            del mods[i]
        else:
            del mods[_index(len(mods), i)]
        self._renumber(mods)

    def __add__(self, other) -> ModuleList:
        return ModuleList(list(self) + list(other))

    def __iadd__(self, other) -> ModuleList:
        return self.extend(other)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """An ordered dict of submodules (registered under their keys), as PyTorch's: indexing
    by key, assignment, deletion, `in`, len, iteration over the keys, keys/values/items,
    update, pop and clear. It has no forward of its own."""
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, m: Module) -> None:
        self.add_module(key, m)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Removes every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Removes the module under key and returns it."""
        m = self[key]
        del self[key]
        return m

    def keys(self):
        """The keys, in order."""
        return self._modules.keys()

    def items(self):
        """(key, module) pairs, in order."""
        return self._modules.items()

    def values(self):
        """The modules, in order."""
        return self._modules.values()

    def update(self, modules) -> None:
        """Adds (or replaces) the modules of a mapping, a ModuleDict or an iterable of
        (key, module) pairs."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for k, m in pairs:
            self[k] = m
