"""Whether ops record the tape (`dl.no_grad()`, `dl.enable_grad()`)."""
from __future__ import annotations

import functools
import threading


class _State(threading.local):
    on = True  # a class default: a plain attribute read, cheaper than getattr(..., default)


_state = _State()


def is_grad_enabled() -> bool:
    """Whether ops record the autograd tape in this thread (True unless turned off)."""
    return _state.on


def set_grad_enabled(on: bool) -> None:
    """Turns recording of the autograd tape on or off for this thread.

    Unlike PyTorch's, it is a plain function, not a context manager: use `dl.no_grad()` /
    `dl.enable_grad()` for a block."""
    _state.on = bool(on)


class _Mode:
    on = True

    def __enter__(self):
        self.prev = is_grad_enabled()
        set_grad_enabled(self.on)
        return self

    def __exit__(self, *exc):
        set_grad_enabled(self.prev)
        return False

    def __call__(self, fn):  # also a decorator
        @functools.wraps(fn)
        def wrapped(*a, **k):
            with type(self)():
                return fn(*a, **k)
        return wrapped


class no_grad(_Mode):
    """Context manager and decorator: ops inside do not record the tape (no gradients,
    less memory); the previous mode is restored on exit. Per thread."""
    on = False


class enable_grad(_Mode):
    """Context manager and decorator: turns tape recording back on inside (e.g.
    within a `no_grad` block); the previous mode is restored on exit. Per thread."""
    on = True
