"""The on-disk artefact cache shared by every runtime.

An entry is a directory of files under `<root>/<key[:2]>/<key>/`, written to a temp dir and
renamed into place (atomic; several processes may race, the first rename wins). A manifest
holds each file's SHA-256 and the package version; an entry whose files do not match is
ignored (and replaced on the next put), never used.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from . import __version__ as VERSION


def cache_root() -> Path:
    env = os.environ.get("CUBE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cube"


_ROOT = Path(__file__).resolve().parents[1]
_GENERATOR_DIRS = ("cube_ir", "codegen", "runtimes")
_fingerprint: str | None = None


def generator_fingerprint() -> str:
    """Identifies the code that turns IR into artefacts (size and mtime of every module of
    the IR, code generators and runtimes), so an edited generator never reuses artefacts the
    old one wrote, even within one package version. Stat calls only: well under a ms."""
    global _fingerprint
    if _fingerprint is None:
        h = hashlib.sha256()
        for d in _GENERATOR_DIRS:
            for dirpath, dirnames, files in os.walk(_ROOT / d):
                dirnames.sort()
                for name in sorted(files):
                    if name.endswith(".py"):
                        st = os.stat(os.path.join(dirpath, name))
                        h.update(f"{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        _fingerprint = h.hexdigest()[:16]
    return _fingerprint


def make_key(*parts) -> str:
    h = hashlib.sha256()
    h.update(VERSION.encode())
    h.update(generator_fingerprint().encode())
    for p in parts:
        h.update(b"\0")
        h.update(p if isinstance(p, bytes) else str(p).encode())
    return h.hexdigest()


class DiskCache:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else cache_root()

    def _ensure_root(self) -> None:
        if not self.root.exists():
            os.makedirs(self.root, mode=0o700, exist_ok=True)
            os.chmod(self.root, 0o700)

    def path(self, key: str) -> Path:
        return self.root / "kernels" / key[:2] / key

    def get(self, key: str) -> dict[str, bytes] | None:
        d = self.path(key)
        try:
            manifest = json.loads((d / "manifest.json").read_bytes())
            if manifest.get("version") != VERSION or manifest.get("key") != key:
                return None
            out = {}
            for name, digest in manifest["files"].items():
                data = (d / name).read_bytes()
                if hashlib.sha256(data).hexdigest() != digest:
                    return None
                out[name] = data
            return out
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, files: dict[str, bytes]) -> None:
        try:
            self._ensure_root()
            d = self.path(key)
            d.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=d.parent))
            manifest = {"version": VERSION, "key": key, "files": {}}
            for name, data in files.items():
                (tmp / name).write_bytes(data)
                manifest["files"][name] = hashlib.sha256(data).hexdigest()
            (tmp / "manifest.json").write_text(json.dumps(manifest))
            if d.exists():  # a stale or corrupt entry: move it aside, then replace
                trash = Path(tempfile.mkdtemp(prefix=".old-", dir=d.parent))
                try:
                    os.rename(d, trash / "x")
                except OSError:
                    pass
                shutil.rmtree(trash, ignore_errors=True)
            try:
                os.rename(tmp, d)
            except OSError:  # another process won the race; theirs is as good as ours
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass  # a cache that cannot be written is only slower

    def info(self) -> dict:
        n, size = 0, 0
        kdir = self.root / "kernels"
        if kdir.exists():
            for entry in kdir.glob("*/*"):
                if entry.name.startswith("."):
                    continue
                n += 1
                size += sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        return {"path": str(self.root), "entries": n, "bytes": size}

    def clear(self) -> int:
        n = self.info()["entries"]
        shutil.rmtree(self.root / "kernels", ignore_errors=True)
        return n


_default: DiskCache | None = None


def default_cache() -> DiskCache:
    """The process-wide cache (re-reads CUBE_CACHE_DIR if it changed)."""
    global _default
    root = cache_root()
    if _default is None or _default.root != root:
        _default = DiskCache(root)
    return _default
