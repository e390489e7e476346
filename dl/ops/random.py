"""Seeds for the counter-based RNG (the bits come from a hash of (key, element index) inside
the fused kernel, see dl/fusion/emit_ops.py): a generator hands out a fresh key per call."""
from __future__ import annotations

import threading

from cube import recording


def _mix(x: int) -> int:
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


class Generator:
    """A source of keys for the counter-based RNG (`dl.rand`, `dl.randn`, dropout).

    Each call that draws numbers takes a fresh key; the numbers are a hash of (key, element
    index) computed inside the kernel, so a seed gives the same numbers on every runtime
    (but not PyTorch's numbers). Pass one as `generator=` or use the default one
    (`dl.manual_seed`)."""
    def __init__(self, seed: int = 0):
        self._lock = threading.Lock()
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        """Restarts this generator's sequence of keys from `seed`; returns self."""
        self.seed = int(seed)
        self._counter = 0
        return self

    def next_key(self) -> tuple[int, int]:
        """(k0, k1): u32 kernel arguments unique to this call under this seed."""
        recording.refuse("drawing random numbers (rand, randn, dropout)")
        with self._lock:
            c = self._counter
            self._counter += 1
        s = self.seed & 0xFFFFFFFFFFFFFFFF
        return _mix(s ^ (s >> 32) ^ 0x5BD1E995), _mix((c * 0x9E3779B9) ^ _mix(s >> 32))


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seeds the default generator (rand, randn, dropout without a `generator=`)
    and returns it."""
    return default_generator.manual_seed(seed)
