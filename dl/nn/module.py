"""`Module`: parameters, buffers and submodules registered by attribute assignment."""
from __future__ import annotations

from collections import OrderedDict

from .. import dtypes as _dtypes
from .. import ops
from ..autograd import no_grad
from ..autograd.zero_grad import zero_grads
from ..ops.shape import to_args
from ..tensor import Tensor
from .parameter import Parameter


class RemovableHandle:
    """What `register_forward_hook` / `register_forward_pre_hook` return: `remove()`
    unregisters the hook (twice is harmless); also a context manager removing it on exit,
    as PyTorch's."""

    _next_id = 0

    def __init__(self, module: Module, kind: str):
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        self._module, self._kind = module, kind

    def remove(self) -> None:
        """Unregisters the hook; the module's no-hook fast path returns when none is left."""
        m = self._module
        hooks = m.__dict__.get("_hooks")
        if hooks is None:
            return
        hooks[self._kind].pop(self.id, None)
        if not hooks["pre"] and not hooks["post"]:
            del m.__dict__["_hooks"]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Module:
    """Base class of the layers: holds parameters, buffers and submodules, as PyTorch's.

    Subclasses call `super().__init__()`, assign `Parameter`s, submodules and tensors
    (through `register_buffer`) as attributes, and define `forward`; calling the module
    calls `forward`, running the forward pre-hooks and hooks registered on it (as
    PyTorch's). `training` is True until `eval()`."""

    # {"pre": OrderedDict, "post": OrderedDict} on an instance with hooks; the class's None
    # keeps the no-hook call to one attribute check
    _hooks = None

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
        """Registers `p` (a Parameter, or None for an absent one) as the parameter
        `name`."""
        self._parameters[name] = p

    def register_buffer(self, name: str, t: Tensor | None, persistent: bool = True) -> None:
        """Registers tensor `t` (or None) as the buffer `name`: state that is not a
        parameter (running statistics), moved by `to`, and saved in state_dict unless
        persistent=False (a causal mask), as PyTorch's."""
        self._buffers[name] = t
        skip = self.__dict__.setdefault("_non_persistent", set())
        if persistent:
            skip.discard(name)
        else:
            skip.add(name)

    def add_module(self, name: str, m: Module | None) -> None:
        """Registers submodule `m` (or None) under `name`."""
        self._modules[name] = m

    # ---- traversal -----------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True):
        """Yields (name, module) for this module (name `prefix`) and every submodule,
        depth first; names are dotted paths. A module reached twice (shared) comes once
        unless remove_duplicate=False, as PyTorch's."""
        if remove_duplicate:
            memo = set() if memo is None else memo
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

    def modules(self):
        """Yields this module and every submodule, depth first, each once."""
        for _, m in self.named_modules():
            yield m

    def apply(self, fn) -> Module:
        """Calls fn on every submodule, children before their parent, then on this module
        (as PyTorch's: `model.apply(init_weights)`); returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def named_children(self):
        """Yields (name, module) for the direct submodules, each once."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        """Yields the direct submodules, each once."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, table: str, prefix: str, recurse: bool):
        """(dotted name, tensor) for each entry of the `table` dict (_parameters or
        _buffers) of this module and (with recurse) its submodules, each shared one once."""
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, t in getattr(m, table).items():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    yield (f"{mp}.{name}" if mp else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """Yields (dotted name, Parameter) for the parameters of this module and
        (with recurse) its submodules, each shared parameter once."""
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True):
        """Yields the parameters of this module and (with recurse) its submodules, each
        once: what an optimiser takes."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        """Yields (dotted name, tensor) for the buffers of this module and (with recurse)
        its submodules, each shared buffer once."""
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True):
        """Yields the buffers of this module and (with recurse) its submodules."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes, state --------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Sets training mode (mode=True) or evaluation mode on this module and all
        submodules (Dropout, BatchNorm2d behave differently); returns self."""
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        """Sets evaluation mode (`train(False)`); returns self."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Sets the `.grad` of every parameter to None, or with set_to_none=False zeroes
        the gradients in place, as PyTorch's."""
        zero_grads(self.parameters(), set_to_none)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Sets `requires_grad` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def _state_items(self, prefix: str = ""):
        """(dotted name, tensor) of every parameter and buffer in PyTorch's state_dict
        order: a module's parameters, its buffers, then each child's, recursively; a
        shared module or tensor under each of its names."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p
        skip = self.__dict__.get("_non_persistent", ())
        for name, b in self._buffers.items():
            if b is not None and name not in skip:
                yield prefix + name, b
        for name, m in self._modules.items():
            if m is not None:
                yield from m._state_items(f"{prefix}{name}.")

    def state_dict(self) -> OrderedDict:
        """An ordered dict of dotted name -> tensor for every parameter and buffer,
        detached (sharing storage with the module), keyed and ordered as PyTorch's (module
        by module; a shared module under each of its names); loadable with
        `load_state_dict` or `dl.save_file`."""
        return OrderedDict((name, t.detach()) for name, t in self._state_items())

    def load_state_dict(self, state: dict, strict: bool = True):
        """Copy values into the existing tensors (shapes must match)."""
        own = dict(self._state_items())
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
        """Moves or casts every parameter and buffer (the arguments of `Tensor.to`: a
        device, a dtype, a tensor); returns self. As PyTorch's: a dtype applies to floating
        tensors only (BatchNorm's int64 `num_batches_tracked` stays), a parameter keeps its
        identity (its values are replaced through `.data`, so an optimiser made before still
        steps it) and its gradient moves with it, and a buffer is replaced."""
        device, dtype = to_args(args, kwargs.get("dtype"), kwargs.get("device"))

        def conv(t):
            return t.to(device=device, dtype=dtype if t.dtype.is_float else None)

        done, new = set(), {}  # a tensor shared by modules (tied weights) stays shared
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None and id(p) not in done:
                    done.add(id(p))
                    with no_grad():
                        p.data = conv(p.detach())
                        if p.grad is not None:
                            p.grad.data = conv(p.grad.detach())
            for name, b in m._buffers.items():
                if b is not None:
                    if id(b) not in new:
                        new[id(b)] = (b, conv(b))  # the old one kept alive: its id stays its
                    m._buffers[name] = new[id(b)][1]
        return self

    def float(self) -> Module:  # noqa: A003
        """`to(dl.float32)`: the floating parameters and buffers cast, as PyTorch's."""
        return self.to(dtype=_dtypes.float32)

    def double(self) -> Module:
        """`to(dl.float64)`, as PyTorch's."""
        return self.to(dtype=_dtypes.float64)

    def half(self) -> Module:
        """`to(dl.float16)`, as PyTorch's."""
        return self.to(dtype=_dtypes.float16)

    def bfloat16(self) -> Module:
        """`to(dl.bfloat16)`, as PyTorch's."""
        return self.to(dtype=_dtypes.bfloat16)

    def cpu(self) -> Module:
        """`to("cpu")`, as PyTorch's."""
        return self.to("cpu")

    # ---- calling -------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        """Computes the module's output; subclasses define it. Call the module
        (`m(x)`) rather than `forward`."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        if self._hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        """forward with the pre-hooks (which may replace args, or args and kwargs) before it
        and the hooks (which may replace the output) after it, in registration order."""
        for hook, with_kwargs in list(self._hooks["pre"].values()):
            if with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {r}.")
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(self._hooks["post"].values()):
            r = hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)
            if r is not None:
                out = r
        return out

    def _add_hook(self, kind: str, hook, prepend: bool, with_kwargs: bool) -> RemovableHandle:
        if self._hooks is None:
            object.__setattr__(self, "_hooks", {"pre": OrderedDict(), "post": OrderedDict()})
        table = self._hooks[kind]
        handle = RemovableHandle(self, kind)
        table[handle.id] = (hook, with_kwargs)
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Registers hook(module, args) to run before each forward: a non-None result
        replaces args (a non-tuple is wrapped in one). with_kwargs=True: hook(module, args,
        kwargs) returning None or (args, kwargs). prepend: run before the others. Returns a
        handle whose `remove()` unregisters it, as PyTorch's."""
        return self._add_hook("pre", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Registers hook(module, args, output) to run after each forward (args as forward
        got them): a non-None result replaces the output. with_kwargs=True: hook(module,
        args, kwargs, output). prepend: run before the others. Returns a handle whose
        `remove()` unregisters it, as PyTorch's."""
        return self._add_hook("post", hook, prepend, with_kwargs)

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path `target` ("" is this module), as PyTorch's;
        AttributeError when a step is missing or not a Module."""
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path `target` ("layer.0.weight"), as PyTorch's;
        AttributeError when it is missing or not a Parameter."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{type(mod).__name__} has no attribute `{name}`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return p

    def extra_repr(self) -> str:
        """The text inside the module's repr's parentheses; subclasses override it."""
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return "\n".join(lines) + (")" if len(lines) == 1 else "\n)")
