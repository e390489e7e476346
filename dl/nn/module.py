"""`Module`: parameters, buffers and submodules registered by attribute assignment."""
from __future__ import annotations

from collections import OrderedDict

from .. import ops
from ..autograd import no_grad
from ..tensor import Tensor
from .parameter import Parameter


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # ---- registration --------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes")
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, p: Parameter | None) -> None:
        self._parameters[name] = p

    def register_buffer(self, name: str, t: Tensor | None) -> None:
        self._buffers[name] = t

    def add_module(self, name: str, m: Module | None) -> None:
        self._modules[name] = m

    # ---- traversal -----------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = ""):
        for mp, m in self.named_modules(prefix):
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mp}.{name}" if mp else name), b

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    # ---- modes, state --------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def state_dict(self) -> OrderedDict:
        out = OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p.detach()
        for name, b in self.named_buffers():
            out[name] = b.detach()
        return out

    def load_state_dict(self, state: dict, strict: bool = True):
        """Copy values into the existing tensors (shapes must match)."""
        own = dict(self.named_parameters()) | dict(self.named_buffers())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}")
        with no_grad():
            for k, t in own.items():
                if k not in state:
                    continue
                v = state[k]
                if not isinstance(v, Tensor):
                    v = ops.tensor(v, dtype=t.dtype, device=t.device)
                if tuple(v.shape) != t.shape:
                    raise ValueError(f"load_state_dict: '{k}' has shape {tuple(v.shape)}, the "
                                     f"module's is {t.shape}")
                ops.assign(t, v)
        return missing, unexpected

    def to(self, *args, **kwargs) -> Module:
        for m in self.modules():
            for name, p in m._parameters.items():
                if p is not None:
                    m._parameters[name] = Parameter(p.detach().to(*args, **kwargs),
                                                    p.requires_grad)
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = b.to(*args, **kwargs)
        return self

    # ---- calling -------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return "\n".join(lines) + (")" if len(lines) == 1 else "\n)")
