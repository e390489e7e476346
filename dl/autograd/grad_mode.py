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


class _Mode:
    on = True

    def __enter__(self):
        self.prev = is_grad_enabled()
        _state.on = self.on
        return self

    def __exit__(self, *exc):
        _state.on = self.prev
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


class set_grad_enabled(_Mode):
    """Turns recording of the autograd tape on or off for this thread, as PyTorch's: called
    alone it sets the mode; as a context manager (`with dl.set_grad_enabled(False):`) or a
    decorator it also restores the previous mode on exit."""

    def __init__(self, on: bool = True):
        self.prev = is_grad_enabled()
        self.on = bool(on)
        _state.on = self.on

    def __enter__(self):
        return self  # set on construction; __exit__ restores what was before it

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*a, **k):
            with set_grad_enabled(self.on):
                return fn(*a, **k)
        _state.on = self.prev  # decorating is not a call that sets the mode
        return wrapped


class enable_grad(_Mode):
    """Context manager and decorator: turns tape recording back on inside (e.g.
    within a `no_grad` block); the previous mode is restored on exit. Per thread."""
    on = True
