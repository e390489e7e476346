"""Errors a user sees from runtimes (the frontend re-exports them)."""


class CubeError(Exception):
    """Base of every error the project raises on purpose."""


class LaunchError(CubeError):
    """A launch could not be made as asked (wrong arguments, limits, a failed device call)."""


class RuntimeUnavailable(CubeError):
    """The runtime cannot start on this machine; the message says why in one line."""


class BackendCompileError(CubeError):
    """A vendor compiler rejected generated code (carries the log and the source)."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        super().__init__(message + (f"\n--- compiler log ---\n{log}" if log else ""))
        self.log, self.source = log, source


class UnsupportedFeature(CubeError):
    """The runtime's target cannot express what the kernel needs ('<what> is not supported
    by the <target> target'), found by its code generator rather than the frontend."""
