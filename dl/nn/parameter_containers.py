"""ParameterList and ParameterDict as torch.nn's: parameters registered under "0", "1", ...
or under their keys, so that parameters(), state_dict() and to() see them."""
from __future__ import annotations

from ..tensor import Tensor
from .module import Module
from .parameter import Parameter

__all__ = ["ParameterDict", "ParameterList"]


def _as_param(v):
    """A plain tensor becomes a Parameter (as PyTorch wraps it); a Parameter or None stays."""
    if isinstance(v, Tensor) and not isinstance(v, Parameter):
        return Parameter(v)
    return v


class ParameterList(Module):
    """A list of parameters named "0", "1", ...: indexing (negative too; a slice gives a
    ParameterList), assignment, append, extend, len, iteration, as PyTorch's. A tensor that
    is not a Parameter is wrapped in one. It has no forward of its own."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _key(self, i: int) -> str:
        n = len(self._parameters)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range")
        return str(i % n)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ParameterList(list(self._parameters.values())[i])
        return self._parameters[self._key(i)]

    def __setitem__(self, i: int, p) -> None:
        self.register_parameter(self._key(i), _as_param(p))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __iadd__(self, values) -> ParameterList:
        return self.extend(values)

    def append(self, p) -> ParameterList:
        """Adds p at the end; returns self."""
        self.register_parameter(str(len(self._parameters)), _as_param(p))
        return self

    def extend(self, values) -> ParameterList:
        """Appends each parameter of an iterable; returns self."""
        for p in values:
            self.append(p)
        return self

    def extra_repr(self) -> str:
        """One line per parameter: its index, shape and dtype."""
        return "\n".join(f"  ({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for k, p in self._parameters.items() if p is not None)


class ParameterDict(Module):
    """An ordered dict of parameters registered under their (string) keys, as PyTorch's:
    indexing, assignment, deletion, `in`, len, iteration over the keys, keys/values/items,
    get, update, pop, clear. A tensor that is not a Parameter is wrapped in one. It has no
    forward of its own."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return self._parameters[key]

    def __setitem__(self, key: str, p) -> None:
        self.register_parameter(key, _as_param(p))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        """The keys, in insertion order."""
        return self._parameters.keys()

    def values(self):
        """The parameters, in insertion order."""
        return self._parameters.values()

    def items(self):
        """(key, parameter) pairs, in insertion order."""
        return self._parameters.items()

    def get(self, key: str, default=None):
        """The parameter under key, or default."""
        return self._parameters.get(key, default)

    def pop(self, key: str):
        """Removes and returns the parameter under key."""
        return self._parameters.pop(key)

    def clear(self) -> None:
        """Removes every parameter."""
        self._parameters.clear()

    def update(self, parameters) -> None:
        """Adds (or replaces) the entries of a mapping or of an iterable of (key, parameter)
        pairs."""
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for k, p in pairs:
            self[k] = p

    def extra_repr(self) -> str:
        """One line per parameter: its key, shape and dtype."""
        return "\n".join(f"  ({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for k, p in self._parameters.items() if p is not None)
