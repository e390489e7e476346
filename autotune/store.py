"""Persistent winners: one JSON file per device under <cache root>/autotune/.

Written atomically (temp file + rename) after merging with what other processes wrote since
we read it; a corrupt or foreign file is ignored (and replaced on the next write)."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

from runtimes import __version__ as VERSION
from runtimes.disk_cache import cache_root

FORMAT = 2  # 2: candidates may be preferred per layout (winners of 1 are stale)


class TuneStore:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else cache_root() / "autotune"
        self._mem: dict[str, dict] = {}  # device id -> {key: entry}
        self._lock = threading.Lock()

    def path(self, device: str) -> Path:
        return self.root / (hashlib.sha256(device.encode()).hexdigest()[:20] + ".json")

    def _read(self, device: str) -> dict:
        try:
            data = json.loads(self.path(device).read_text())
            if (data.get("format") != FORMAT or data.get("version") != VERSION
                    or data.get("device") != device or not isinstance(data["entries"], dict)):
                return {}
            return {k: v for k, v in data["entries"].items()
                    if isinstance(v, dict) and isinstance(v.get("winner"), str)}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def entries(self, device: str) -> dict:
        with self._lock:
            if device not in self._mem:
                self._mem[device] = self._read(device)
            return self._mem[device]

    def get(self, device: str, key: str) -> dict | None:
        return self.entries(device).get(key)

    def put(self, device: str, key: str, entry: dict) -> None:
        ents = self.entries(device)
        with self._lock:
            ents[key] = entry
            merged = {**self._read(device), **ents}
            data = {"format": FORMAT, "version": VERSION, "device": device, "entries": merged}
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.root)
                with os.fdopen(fd, "w") as f:
                    json.dump(data, f, indent=1, sort_keys=True)
                os.replace(tmp, self.path(device))
            except OSError:
                pass  # an unwritable cache only means tuning again next time

    def clear(self) -> None:
        with self._lock:
            self._mem.clear()


_default: TuneStore | None = None


def default_store() -> TuneStore:
    """The process-wide store (follows CUBE_CACHE_DIR if it changes)."""
    global _default
    root = cache_root() / "autotune"
    if _default is None or _default.root != root:
        _default = TuneStore(root)
    return _default
