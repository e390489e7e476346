"""`dl.Tensor`: a view (shape, element strides, offset) of a runtime buffer, or a lazy value.

A tensor is either *materialised* (`_buf` holds its storage) or *lazy* (`_node` is an
elementwise graph node, see dl/fusion): lazy tensors are computed, several ops in one kernel,
when a value is needed. Ops live in `dl.ops` (a registry); the methods here forward to them."""
from __future__ import annotations

import numpy as np

from cube import recording

from . import dtypes, shapes
from .io import host


class Tensor:
    __array_priority__ = 1000  # numpy_array + tensor -> Tensor.__radd__

    def __init__(self, buf, shape, strides, offset, dtype, device, node=None):
        self._buf = buf
        self._node = node
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self.offset = int(offset)
        self.dtype = dtype
        self.device = device
        self.requires_grad = False
        self.grad = None
        self._grad_fn = None

    # ---- construction (internal) -------------------------------------------------------
    @classmethod
    def _lazy(cls, node, device) -> Tensor:
        t = cls(None, node.shape, shapes.contiguous_strides(node.shape), 0, node.dtype,
                device, node)
        t._generation = recording.generation
        return t

    @classmethod
    def _empty(cls, shape, dtype, device) -> Tensor:
        shape = tuple(map(int, shape))
        buf = device.rt.empty(shapes.numel(shape), dtype.cube)
        return cls(buf, shape, shapes.contiguous_strides(shape), 0, dtype, device)

    @classmethod
    def _from_numpy(cls, arr: np.ndarray, dtype, device) -> Tensor:
        data = np.ascontiguousarray(host.to_storage(arr, dtype)).reshape(-1)
        buf = device.rt.from_numpy(data, dtype.cube)
        return cls(buf, arr.shape, shapes.contiguous_strides(arr.shape), 0, dtype, device)

    def _view(self, shape, strides, offset) -> Tensor:
        """Another view of this tensor's storage (materialises a lazy tensor first)."""
        src = self._materialise()
        return Tensor(src._buf, shape, strides, offset, self.dtype, self.device)

    # ---- state -------------------------------------------------------------------------
    @property
    def is_lazy(self) -> bool:
        return self._buf is None

    def _materialise(self) -> Tensor:
        if self._buf is None:
            from .fusion.materialise import materialise
            if recording.active is not None and \
                    getattr(self, "_generation", None) != recording.generation:
                # made before this recording began (a module's zero-initialised buffer):
                # computed once, as eagerly, not again at every replay
                with recording.paused():
                    materialise([self])
            else:
                materialise([self])
        return self

    def _karg(self, shape=None, strides=None):
        """The storage as a kernel argument: the whole buffer (its length bounds the checked
        accesses) carrying this view's shape and strides for `Tensor` params. Kernels add
        `self.offset` themselves."""
        self._materialise()
        return self._buf.view(tuple(self.shape if shape is None else shape) or (1,),
                              tuple(self._strides if strides is None else strides) or (1,))

    @property
    def strides(self) -> tuple:
        return self._strides

    def stride(self, dim: int | None = None):
        return self._strides if dim is None else self._strides[shapes.norm_dim(dim, self.ndim)]

    def is_contiguous(self) -> bool:
        return shapes.is_contiguous(self.shape, self._strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return shapes.numel(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[shapes.norm_dim(dim, self.ndim)]

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- host I/O ----------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host copy (bf16 is returned as float32)."""
        recording.refuse("reading a tensor on the host (numpy, item, tolist, float)")
        self._materialise()
        if self.numel() == 0:
            return np.zeros(self.shape, host.from_storage(np.zeros(0, self.dtype.storage_np),
                                                          self.dtype).dtype)
        # host runtimes' memory is read in place (the view is copied below); others copy
        flat = getattr(self._buf, "array", None)
        if flat is None:
            flat = self._buf.numpy().reshape(-1)
        item = flat.itemsize
        view = np.lib.stride_tricks.as_strided(
            flat[self.offset:], self.shape, tuple(s * item for s in self._strides))
        return host.from_storage(np.array(view), self.dtype)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor of one element, got shape {self.shape}")
        return self.numpy().reshape(-1)[0].item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    # ---- DLPack ------------------------------------------------------------------------
    def __dlpack__(self, **kwargs):
        from .io.dlpack import export_view
        recording.refuse("exporting a tensor through DLPack")
        return export_view(self).__dlpack__(**kwargs)

    def __dlpack_device__(self):
        from .io.dlpack import export_device
        return export_device(self)

    # ---- misc --------------------------------------------------------------------------
    def __repr__(self) -> str:
        if self.numel() == 0:
            body = f"[], size={self.shape}"
        else:
            body = np.array2string(self.numpy(), separator=", ", prefix="tensor(",
                                   threshold=200, edgeitems=3)
        extra = [] if self.dtype is dtypes.float32 else [f"dtype={self.dtype!r}"]
        if self.device.name != "cpu":
            extra.append(f"device='{self.device}'")
        if self._grad_fn is not None:
            extra.append(f"grad_fn=<{self._grad_fn.name}>")
        elif self.requires_grad:
            extra.append("requires_grad=True")
        return "tensor(" + ", ".join([body, *extra]) + ")"

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __deepcopy__(self, memo):
        from . import ops
        t = ops.clone(self.detach())._materialise()
        t.requires_grad = self.requires_grad
        return t


def _forward(name: str):
    def method(self, *args, **kwargs):
        from .ops.registry import OPS
        return OPS[name](self, *args, **kwargs)
    method.__name__ = name
    return method


def _reflected(name: str):
    def method(self, other):
        from .ops.registry import OPS
        return OPS[name](other, self)
    method.__name__ = f"__r{name}__"
    return method


_DUNDER = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div",
           "__pow__": "pow", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le",
           "__gt__": "gt", "__ge__": "ge", "__and__": "logical_and", "__or__": "logical_or",
           "__xor__": "logical_xor", "__neg__": "neg", "__abs__": "abs",
           "__invert__": "logical_not", "__getitem__": "getitem", "__setitem__": "setitem"}
for _d, _op in _DUNDER.items():
    setattr(Tensor, _d, _forward(_op))
for _d, _op in {"__radd__": "add", "__rsub__": "sub", "__rmul__": "mul",
                "__rtruediv__": "div", "__rpow__": "pow", "__rand__": "logical_and",
                "__ror__": "logical_or"}.items():
    setattr(Tensor, _d, _reflected(_op))

# methods forwarded by name to dl.ops (the registry can grow: see ops/registry.py)
METHODS = (
    "neg abs sqrt rsqrt exp log log1p sin cos tanh erf floor ceil round sign sigmoid relu gelu "
    "silu square reciprocal clamp clamp_min clamp_max where maximum minimum add sub mul div pow "
    "eq ne lt le gt ge logical_and logical_or logical_xor logical_not "
    "reshape view permute transpose t squeeze unsqueeze flatten expand expand_as contiguous "
    "repeat gather index_select to clone detach float double half bfloat16 int long bool "
    "backward requires_grad_ zero_ fill_ copy_ broadcast_to cpu type_as"
).split()
for _m in METHODS:
    setattr(Tensor, _m, _forward(_m))
Tensor.T = property(lambda self: self.permute(*reversed(range(self.ndim))))
Tensor.mT = property(lambda self: self.transpose(-2, -1))
Tensor.is_cpu = property(lambda self: self.device.name == "cpu")

