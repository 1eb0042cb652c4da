"""ConvertError: a bad input, reported as one line naming the file and, where there is one, the
tensor."""

from __future__ import annotations

import os
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


class ConvertError(Exception):
    """A conversion failure the user can act on; ``str()`` is ``<file>: <tensor>: <reason>``."""

    def __init__(self, file: Optional[PathLike], reason: str, tensor: Optional[str] = None):
        self.file = os.fspath(file) if file is not None else None
        self.tensor = tensor
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.file, self.tensor) if p]
        parts.append(self.reason)
        return ": ".join(parts)
