"""Devices: a device name is a cube runtime name ("cpu", "interp", "opencl", "wgpu", "cuda")."""
from __future__ import annotations

import cube as cb


class Device:
    """A device: a cube runtime named "cpu", "interp", "opencl", "cuda", "wgpu", ...

    Get one with `dl.device(name)` (one instance per name; "cuda:0" means "cuda", the index
    is ignored). It compares equal to its name. The runtime starts on first use (`rt`)."""
    __slots__ = ("name", "_rt")

    def __init__(self, name: str):
        self.name = name
        self._rt = None

    @property
    def rt(self):
        """The cube runtime; starting it raises `cube.RuntimeUnavailable` with the reason."""
        if self._rt is None:
            self._rt = cb.runtime(self.name)
        return self._rt

    @property
    def is_host(self) -> bool:
        """Host memory (NumPy-backed buffers): DLPack export works without a copy."""
        return self.name in ("cpu", "interp")

    def __eq__(self, other) -> bool:
        if other is self:  # devices are interned (get): the common case
            return True
        return isinstance(other, Device) and other.name == self.name or other == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"device('{self.name}')"

    def __str__(self) -> str:
        return self.name


_devices: dict[str, Device] = {}
default_device = "cpu"


def set_default_device(name: str) -> None:
    """Where tensors are created when no device is given ("cpu" unless set)."""
    global default_device
    default_device = get(name).name


def get_default_device() -> Device:
    """The device tensors are created on when none is given (`set_default_device`'s), as
    PyTorch's `torch.get_default_device()`."""
    return get()


def get(d=None) -> Device:
    """The Device for `d`: a Device, a name, or None for the default device."""
    if isinstance(d, Device):
        return d
    name = default_device if d is None else str(d).split(":")[0]  # "cuda:0" -> "cuda"
    dev = _devices.get(name)
    if dev is None:
        dev = _devices[name] = Device(name)
    return dev
