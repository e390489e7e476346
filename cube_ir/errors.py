"""Errors raised by IR verification and passes; they carry the op's source location."""


class IRError(Exception):
    def __init__(self, message: str, loc=None):
        super().__init__(message)
        self.message = message
        self.loc = loc  # (filename, line, col, source_line) or None
