"""User-facing errors: each names the place in the user's source it is about."""
from __future__ import annotations

from runtimes.errors import BackendCompileError, CubeError, LaunchError, RuntimeUnavailable


class CompileError(CubeError):
    """A kernel cannot be compiled; `str(e)` is `file:line:col: error: ...` + source + caret."""

    def __init__(self, message: str, loc=None):
        self.message = message
        self.loc = loc
        super().__init__(format_located(message, loc))


class CapabilityError(CompileError):
    """A kernel needs what its target lacks, by the target's declared capability table:
    `capability` names the entry (e.g. 'f64', 'atomic add/f32/shared', 'plane_ops') and
    `target` the target. Tests skip on this, by name, never on a message."""

    def __init__(self, message: str, loc=None, *, capability: str, target: str):
        self.capability = capability
        self.target = target
        super().__init__(message, loc)


def format_located(message: str, loc) -> str:
    if not loc:
        return f"error: {message}"
    filename, line, col, src = loc
    out = f"{filename}:{line}:{col + 1}: error: {message}"
    if src:
        stripped = src.rstrip("\n")
        out += f"\n    {stripped}\n    {' ' * col}^"
    return out


__all__ = ["BackendCompileError", "CapabilityError", "CompileError", "CubeError", "LaunchError",
           "RuntimeUnavailable", "format_located"]
