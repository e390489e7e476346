"""Whether elementwise ops are recorded lazily and fused, and how big a graph may grow."""
from __future__ import annotations

import threading


class _State(threading.local):
    on = True  # a class default: a plain attribute read, cheaper than getattr(..., default)


_state = _State()

# Nodes in one fused kernel before we materialise: bounds compile time and register pressure.
MAX_NODES = 48


def enabled() -> bool:
    return _state.on


class fusion:
    """`dl.fusion(False)` turns fusion off; as a context manager it restores the old setting
    on exit (`with dl.fusion(False): ...`), called plainly it stays set."""

    def __init__(self, on: bool = True):
        self.prev = enabled()
        _state.on = bool(on)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.on = self.prev
        return False
