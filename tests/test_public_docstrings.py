"""Every public API object has a docstring (issue 14, item 7).

Walks the public names of `cube`, `dl`, `dl.nn`, `dl.nn.functional` and `dl.optim` (their
`__all__`, else their non-underscore names): each function and class, and each public method
or property defined on those classes or on their project base classes, must carry its own
docstring. Objects from outside the project (`typing.TypeVar`, builtins) are not walked."""
from __future__ import annotations

import importlib
import inspect

MODULES = ("cube", "dl", "dl.nn", "dl.nn.functional", "dl.optim")
PROJECT = ("cube", "dl")

# Undocumented public methods whose source belongs to another owner (cube/kernel.py); they
# are reported, not failed, until documented there. Remove an entry once it has a docstring.
PENDING: frozenset[str] = frozenset()


def _ours(obj) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod.split(".")[0] in PROJECT


def _doc(obj) -> str:
    return (getattr(obj, "__doc__", None) or "").strip()


def _members(cls):
    """(qualified name, object) for the public methods and properties that `cls` and its
    project base classes define themselves."""
    for base in cls.__mro__:
        if base is object or not _ours(base):
            continue
        for name, attr in vars(base).items():
            if name.startswith("_"):
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property) or inspect.isfunction(attr):
                yield f"{base.__module__}.{base.__qualname__}.{name}", attr


def missing_docstrings() -> list[str]:
    missing: dict[str, None] = {}  # ordered set: an object reached twice is listed once
    for modname in MODULES:
        mod = importlib.import_module(modname)
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not _ours(obj):
                continue
            if not _doc(obj):
                missing[f"{modname}.{name}"] = None
            if inspect.isclass(obj):
                for qual, attr in _members(obj):
                    if not _doc(attr):
                        missing[qual] = None
    return list(missing)


def test_every_public_object_has_a_docstring():
    missing = [m for m in missing_docstrings() if m not in PENDING]
    assert not missing, (f"{len(missing)} public objects have no docstring:\n  "
                         + "\n  ".join(missing))


if __name__ == "__main__":
    for m in missing_docstrings():
        print(m)
