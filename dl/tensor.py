"""`dl.Tensor`: a view (shape, element strides, offset) of a runtime buffer, or a lazy value.

A tensor is either *materialised* (`_buf` holds its storage) or *lazy* (`_node` is an
elementwise graph node, see dl/fusion): lazy tensors are computed, several ops in one kernel,
when a value is needed.

This is the bottom of dl's layers (docs/dl.md): storage, views, dtypes, devices, host I/O.
It imports nothing above it. The layers above complete the class: dl.fusion supplies
`_compute` (how a lazy tensor is computed), and dl.ops declares every op method and operator
(`t.exp()`, `a + b`) through its registry (dl/ops/registry.py)."""
from __future__ import annotations

import weakref

import numpy as np

from cube import recording

from . import dtypes, shapes
from .io import host

_KDL_CPU = 1  # DLPack's device type for host memory

# Weak references to the lazy tensors made so far that may still be uncomputed: an in-place
# write computes those that read the storage it overwrites first (dl/fusion/writes.py), so a
# lazy y = x * 2 keeps x's values of when it was made. Pruned of dead and computed tensors
# whenever it doubles.
PENDING: list = []
_PRUNE_AT = [256]

# view_history(t) -> bool: whether t, a view made by indexing or a shape op that does not
# require grad, does now: its base was given a history by an in-place write after t was
# made (then t takes the view of that history, as PyTorch regenerates a view's grad_fn).
# Set by dl.ops.indexing, above this layer.
VIEW_HISTORY: list = [None]


def prune_pending() -> list:
    """Drop the dead and the computed from PENDING; returns the lazy tensors left."""
    live, tensors = [], []
    for r in PENDING:
        t = r()
        if t is not None and t._buf is None:
            live.append(r)
            tensors.append(t)
    PENDING[:] = live
    _PRUNE_AT[0] = max(256, 2 * len(live))
    return tensors


class Tensor:
    """An n-dimensional array on a device, with autograd; PyTorch-like.

    Make tensors with `dl.tensor`, `dl.zeros`, `dl.randn`, ... rather than the constructor.
    A tensor is a view (`shape`, element `strides`, `offset`) of a runtime buffer, or a lazy
    value that elementwise ops build and compute, fused into one kernel, when a value is
    needed. Attributes: `shape` (a tuple), `dtype`, `device`, `requires_grad`, `grad`. Its op
    methods and operators (`t.exp()`, `a + b`, `t[i]`) are the functions of `dl.ops`."""
    __array_priority__ = 1000  # numpy_array + tensor -> Tensor.__radd__
    # the in-place write count (dl/fusion/writes.py) when the tensor's value last matched its
    # gradient history (made, or written in place as itself): a later write to its storage
    # through another view leaves the history stale, which autograd refuses to use
    _hist_at = 0
    # (tensor, index) of a view made by basic indexing: an in-place op on the view under
    # autograd writes through that tensor, which takes the history (dl/ops/indexing.py)
    _index_of = None
    _rg = False  # requires_grad's own flag (the property below)

    def __init__(self, buf, shape, strides, offset, dtype, device, node=None):
        # (_lazy sets the same attributes without the conversions: keep the two in step)
        self._buf = buf
        self._node = node
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self.offset = int(offset)
        self.dtype = dtype
        self.device = device
        self.grad = None
        self._grad_fn = None

    # ---- construction (internal) -------------------------------------------------------
    @classmethod
    def _lazy(cls, node, device) -> Tensor:
        # __init__'s work without its conversions: every eager elementwise op makes one
        t = object.__new__(cls)
        t._buf, t._node, t.shape = None, node, node.shape
        t._strides, t.offset = shapes.contiguous_strides(node.shape), 0
        t.dtype, t.device = node.dtype, device
        t.grad, t._grad_fn = None, None
        t._generation = recording.generation
        PENDING.append(weakref.ref(t))
        if len(PENDING) > _PRUNE_AT[0]:
            prune_pending()
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
    def requires_grad(self) -> bool:
        """Whether autograd records the ops on this tensor (a leaf's gradient is kept in
        `.grad`). A view (`b[i]`, a reshape) made before b was written in place by a value
        that requires grad requires grad from then on, with the view of b's new history."""
        if self._rg:
            return True
        if self._index_of is None:
            return False
        return VIEW_HISTORY[0](self)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._rg = value

    @property
    def is_lazy(self) -> bool:
        """Whether t is an uncomputed elementwise expression (no storage yet)."""
        return self._buf is None

    def _materialise(self) -> Tensor:
        if self._buf is None:
            self._compute()
        return self

    def _share_out(self, arr=None):
        """This tensor's storage is handed out writable as arr (`numpy()`, DLPack; None: for
        good, an import): writes into it reach no dl bookkeeping. Returns the array to hand
        out. dl/fusion/lazy.py gives the body (lazy readers of the storage computed now,
        later ones when made, while such an array or a view of it lives)."""
        return arr

    def _compute(self) -> None:
        """Computes this lazy tensor into fresh storage. Lazy tensors are made by dl.fusion,
        which replaces this method with its own when it is imported (dl/fusion/lazy.py)."""
        raise RuntimeError("a lazy tensor is computed by dl.fusion (import dl)")

    def _karg(self, shape=None, strides=None):
        """The storage as a kernel argument: the whole buffer (its length bounds the checked
        accesses) carrying this view's shape and strides for `Tensor` params. Kernels add
        `self.offset` themselves."""
        self._materialise()
        return self._buf.view(tuple(self.shape if shape is None else shape) or (1,),
                              tuple(self._strides if strides is None else strides) or (1,))

    @property
    def strides(self) -> tuple:
        """The strides per dim, in elements (PyTorch's `stride()` as a property)."""
        return self._strides

    def stride(self, dim: int | None = None):
        """The strides in elements: a tuple, or the stride of one `dim`."""
        return self._strides if dim is None else self._strides[shapes.norm_dim(dim, self.ndim)]

    def is_contiguous(self) -> bool:
        """Whether t's elements are laid out row-major without gaps."""
        return shapes.is_contiguous(self.shape, self._strides)

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.shape)

    def dim(self) -> int:
        """The number of dims (as `ndim`)."""
        return len(self.shape)

    def numel(self) -> int:
        """The number of elements."""
        return shapes.numel(self.shape)

    def size(self, dim: int | None = None):
        """The shape as a tuple, or the size of one `dim` (negative dims count from the end)."""
        return self.shape if dim is None else self.shape[shapes.norm_dim(dim, self.ndim)]

    def element_size(self) -> int:
        """The size of one element in bytes."""
        return self.dtype.itemsize

    @property
    def is_leaf(self) -> bool:
        """Whether t was not produced by a recorded op (its `.grad` is kept by backward)."""
        return not self.requires_grad or self._grad_fn is None  # (the read may give a
        # view the history of its base's in-place write: dl.ops.indexing._view_history)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- host I/O ----------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """t's values as a NumPy array; on the host devices (cpu, interp) it shares t's memory,
        as PyTorch's `numpy()` does.

        Host devices: no copy. The array has t's shape and (in bytes) strides, so a transposed
        or sliced tensor gives a strided view; writes through t (`t.zero_()`, `t.copy_(u)`,
        `t[i] = v`, an optimizer step) are seen in the array and writes into the array are
        seen by t. The array keeps the storage alive after t is gone, and the storage is not
        reused for other tensors while the array (or a view of it) lives. Take `.copy()` for a
        snapshot. Since a write into the array reaches no dl op, the lazy values reading the
        storage are computed first and later elementwise ops on it are not deferred
        while the array lives (`_share_out`): an op made before a write into the array
        never sees it.
        A lazy tensor is computed first; a 0-d tensor gives a 0-d array.
        Exceptions, which return a new array (a copy): bfloat16, which NumPy lacks, comes back
        as float32 (PyTorch raises there), tensors on other devices (opencl, wgpu, cuda) are
        copied to the host, and an empty tensor gives a new empty array.
        Unlike PyTorch, a tensor that requires grad is allowed (no `.detach()` needed): the
        array shares the values, and writes into it bypass autograd."""
        recording.refuse("reading a tensor on the host (numpy, item, tolist, float)")
        self._materialise()
        if self.numel() == 0:
            return np.zeros(self.shape, host.from_storage(np.zeros(0, self.dtype.storage_np),
                                                          self.dtype).dtype)
        share = getattr(self._buf, "share", None)  # host runtimes: zero-copy
        if share is not None and self.dtype is not dtypes.bfloat16:
            return self._share_out(share(self.offset, self.shape, self._strides))
        # bf16 widens into a new array; other runtimes copy the buffer to the host first
        flat = self._buf.array if share is not None else self._buf.numpy().reshape(-1)
        if share is None and self.offset == 0 and flat.size == self.numel() \
                and self.is_contiguous():
            return host.from_storage(flat.reshape(self.shape), self.dtype)  # already a copy
        item = flat.itemsize
        view = np.lib.stride_tricks.as_strided(
            flat[self.offset:], self.shape, tuple(s * item for s in self._strides))
        return host.from_storage(view, self.dtype) if self.dtype is dtypes.bfloat16 \
            else np.array(view)

    def tolist(self):
        """t's values as (nested) Python lists; a 0-d tensor gives a scalar."""
        return self.numpy().tolist()

    def item(self):
        """The value of a one-element tensor as a Python number (or bool)."""
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor of one element, got shape {self.shape}")
        return self.numpy().reshape(-1)[0].item()

    def __float__(self) -> float:
        return float(self.item())

    def __format__(self, spec: str) -> str:
        """f"{loss:.4f}": a 0-d tensor formats as its number, as PyTorch's; other tensors
        take only an empty spec (their repr)."""
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"unsupported format string passed to Tensor.__format__ "
                            f"(a tensor of shape {self.shape}; only a 0-d tensor takes a spec)")
        return repr(self)

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        """`np.asarray(t)`: `t.numpy()` (shared memory on host devices); `copy=True` (as
        `np.array(t)` asks) or a dtype change gives a copy."""
        a = self.numpy()
        if copy:
            return np.array(a, dtype=dtype, copy=True)
        return a if dtype is None else a.astype(dtype, copy=False)

    # ---- DLPack ------------------------------------------------------------------------
    # Export: a NumPy view with the tensor's shape, strides and offset over its buffer's
    # memory exports itself (host tensors only; import is dl.from_dlpack, dl/io/dlpack.py).
    def __dlpack__(self, **kwargs):
        recording.refuse("exporting a tensor through DLPack")
        return self._host_view().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        self._check_host()
        return (_KDL_CPU, 0)

    def _check_host(self):
        if not self.device.is_host:
            raise BufferError(f"DLPack export is only implemented for host tensors, this one "
                              f"is on '{self.device}': copy it with .cpu() first")

    def _host_view(self) -> np.ndarray:
        self._check_host()
        if self.dtype is dtypes.bfloat16:
            raise BufferError("bfloat16 cannot be exported through NumPy's DLPack; use "
                              ".float()")
        self._materialise()
        if self.numel() == 0:
            return np.zeros(self.shape, self.dtype.storage_np)
        # shares the memory and holds it: it stays out of the buffer pool while the exported
        # array lives (a DLPack consumer holds the array until its deleter runs)
        return self._share_out(self._buf.share(self.offset, self.shape, self._strides))

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

    @property
    def is_cpu(self) -> bool:
        """Whether t is on the "cpu" device."""
        return self.device.name == "cpu"
