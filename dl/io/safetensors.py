"""The safetensors format, written and read here (no dependency): an 8-byte little-endian
header length, a JSON header {name: {dtype, shape, data_offsets}} (plus optional
"__metadata__"), then the raw little-endian tensor bytes."""
from __future__ import annotations

import json
import struct

import numpy as np

from .. import dtypes
from ..ops.creation import tensor
from . import host

_NAMES = {dtypes.float16: "F16", dtypes.bfloat16: "BF16", dtypes.float32: "F32",
          dtypes.float64: "F64", dtypes.int32: "I32", dtypes.int64: "I64",
          dtypes.bool_: "BOOL"}
_FROM = {v: k for k, v in _NAMES.items()}


def save_file(tensors: dict, path, metadata: dict | None = None) -> None:
    """Writes a dict of tensors (name -> Tensor) to `path` in the safetensors format.

    metadata: optional str -> str pairs stored in the header. Tensors are written in name
    order, little-endian, without the `safetensors` package; bfloat16 keeps its raw bits."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name]
        data = host.to_storage(t.numpy(), t.dtype) if t.dtype is dtypes.bfloat16 else \
            t.numpy()
        raw = np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # align the data to 8 bytes, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


def load_file(path, device=None) -> dict:
    """Reads a safetensors file into a dict of tensors (name -> Tensor) on `device`.

    Supports F16, BF16, F32, F64, I32, I64 and BOOL; other dtypes raise ValueError. The
    header's `__metadata__` is skipped."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (too short)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n])
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = _FROM.get(info["dtype"])
        if dt is None:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {info['dtype']}")
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dt.storage_np.newbyteorder("<")).astype(dt.storage_np)
        arr = arr.reshape(info["shape"])
        if dt is dtypes.bfloat16:
            arr = host.from_storage(arr, dt)
        out[name] = tensor(arr, dtype=dt, device=device)
    return out


def save_module(module, path) -> None:
    """Writes a module's state_dict to `path` (safetensors)."""
    save_file(module.state_dict(), path)


def load_module(module, path, strict: bool = True):
    """Loads a safetensors file into a module (`load_state_dict`); returns its result."""
    return module.load_state_dict(load_file(path), strict=strict)
