"""Containers: Sequential, ModuleList."""
from __future__ import annotations

from .module import Module


class Sequential(Module):
    """Modules applied in order: `Sequential(a, b)(x)` is `b(a(x))`. Indexable,
    iterable; submodules are named "0", "1", ..."""
    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def forward(self, x):
        """Passes x through each module in turn."""
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, m: Module) -> Sequential:
        """Adds m at the end; returns self."""
        self.add_module(str(len(self._modules)), m)
        return self


class ModuleList(Module):
    """A list of submodules (registered, so their parameters are the module's);
    indexable and iterable. It has no forward of its own."""
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m: Module) -> ModuleList:
        """Adds m at the end; returns self."""
        self.add_module(str(len(self._modules)), m)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())
