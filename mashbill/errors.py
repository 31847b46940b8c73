"""One base error for user-facing problems; the CLI prints these as one line, without a traceback."""

from __future__ import annotations


class MashbillError(Exception):
    """A problem with the user's input or environment (not a bug)."""


class SpecError(MashbillError):
    """A spec or a file it references is malformed.

    The message always names the file, the line where known, the field and what was expected.
    """

    def __init__(self, path: str, message: str, *, line: int | None = None, field: str | None = None):
        self.path = str(path)
        self.line = line
        self.field = field
        self.detail = message
        where = self.path + (f":{line}" if line else "")
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


class StoreError(MashbillError):
    """The store cannot be opened or written (locked, read-only, newer schema...)."""


class TeacherError(MashbillError):
    """The teacher cannot be loaded or reached before any bulk work starts."""
