"""`dl.inference_mode()`, as torch's: a context manager and decorator that turns off tape
recording (dl has no inference tensors: it is `no_grad` under torch's name)."""
from __future__ import annotations

import functools
import threading

from .grad_mode import _state

__all__ = ["inference_mode", "is_inference_mode_enabled"]

class _Depth(threading.local):
    n = 0  # how many inference_mode(True) blocks are open in this thread


_inference = _Depth()


class inference_mode:
    """Context manager and decorator (`@dl.inference_mode()` or bare
    `@dl.inference_mode`): ops inside record no tape, as under `no_grad`; `mode=False`
    leaves the mode as it is. The previous mode is restored on exit."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # bare decorator
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = _state.on
        if self.mode:
            _state.on = False
            _inference.n += 1
        return self

    def __exit__(self, *exc):
        if self.mode:
            _inference.n -= 1
        _state.on = self.prev
        return False

    def __call__(self, fn):
        """Wraps fn so that each call runs inside this mode."""
        mode = self.mode

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with inference_mode(mode):
                return fn(*a, **k)
        return wrapped

    def clone(self) -> inference_mode:
        """A new context manager with the same mode (torch's method)."""
        return inference_mode(self.mode)


def is_inference_mode_enabled() -> bool:
    """Whether an `inference_mode(True)` block is open in this thread."""
    return _inference.n > 0
