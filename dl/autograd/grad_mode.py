"""Whether ops record the tape (`dl.no_grad()`, `dl.enable_grad()`)."""
from __future__ import annotations

import functools
import threading

_state = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_state, "on", True)


def set_grad_enabled(on: bool) -> None:
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
    on = False


class enable_grad(_Mode):
    on = True
