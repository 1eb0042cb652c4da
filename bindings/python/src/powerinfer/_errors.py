"""The exceptions of the powerinfer package: one class per pi_status of the C API."""

from __future__ import annotations

from . import _powerinfer

__all__ = [
    "Error",
    "InvalidArgumentError",
    "FileError",
    "FormatError",
    "UnsupportedError",
    "OutOfMemoryError",
    "ContextFullError",
    "InternalError",
    "CancelledError",
]


class Error(Exception):
    """A libpowerinfer call failed.

    ``str(error)`` is the library's message (``pi_last_error()``), which names the file, tensor,
    key or argument at fault; ``status`` is the ``pi_status`` code.
    """

    status: int

    def __init__(self, message: str, status: int = -7) -> None:
        super().__init__(message)
        self.status = status

    @property
    def status_name(self) -> str:
        """The C name of the status, e.g. ``"PI_ERR_FORMAT"``."""
        return _powerinfer.status_str(self.status)


class InvalidArgumentError(Error, ValueError):
    """PI_ERR_INVALID_ARGUMENT: an out-of-range value, a bad token id, a misused object."""


class FileError(Error, OSError):
    """PI_ERR_IO: a file is missing, unreadable or unwritable."""


class FormatError(Error):
    """PI_ERR_FORMAT: a malformed or inconsistent model file."""


class UnsupportedError(Error):
    """PI_ERR_UNSUPPORTED: valid, but not supported by this build (e.g. a weight type)."""


class OutOfMemoryError(Error, MemoryError):
    """PI_ERR_OUT_OF_MEMORY."""


class ContextFullError(Error):
    """PI_ERR_CONTEXT_FULL: the prompt or the tokens do not fit in the context's n_ctx."""


class InternalError(Error):
    """PI_ERR_INTERNAL: a bug in libpowerinfer."""


class CancelledError(Error):
    """PI_STATUS_CANCELLED where a call cannot return a partial result: model loading stopped by
    the progress callback, or ``Context.eval`` stopped by ``Context.cancel``. (A cancelled
    generation is not an error: it returns the text so far.)"""


for _cls in (Error, InvalidArgumentError, FileError, FormatError, UnsupportedError,
             OutOfMemoryError, ContextFullError, InternalError, CancelledError):
    _cls.__module__ = "powerinfer"

_powerinfer._error_classes.update(
    {
        -1: InvalidArgumentError,
        -2: FileError,
        -3: FormatError,
        -4: UnsupportedError,
        -5: OutOfMemoryError,
        -6: ContextFullError,
        -7: InternalError,
        _powerinfer.STATUS_CANCELLED: CancelledError,
    }
)
