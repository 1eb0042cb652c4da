"""Atomic output: everything is written to `<outfile>.tmp-XXXX` in the output's folder, synced,
and renamed over the output only when complete; on any failure the temporary file is removed, so
a failed conversion leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator


def current_umask() -> int:
    """The process's umask (reading it means setting it, so it is put straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def temporary_beside(outfile: Path) -> Iterator[Path]:
    """A fresh temporary path next to `outfile`, deleted on exit unless it was renamed."""
    fd, name = tempfile.mkstemp(prefix=outfile.name + ".tmp-", dir=outfile.parent)
    os.close(fd)
    path = Path(name)
    # mkstemp makes the file private (0600); the output should get what a plain open() gives.
    os.chmod(path, 0o666 & ~current_umask())
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def sync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def commit(tmp: Path, outfile: Path) -> None:
    """Durably replaces `outfile` by the finished `tmp`."""
    sync_file(tmp)
    os.replace(tmp, outfile)
    fd = os.open(outfile.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_sparse(path: Path) -> None:
    """PowerInfer's converters write a plain GGUF and then overwrite its magic (docs/file-format.md)."""
    with open(path, "rb+") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        f.seek(0)
        f.write(b"PWRI")
