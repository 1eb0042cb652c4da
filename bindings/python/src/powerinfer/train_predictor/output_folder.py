"""The output folder changes all at once or not at all: every output is written into a staging
folder beside it (OUT.tmp-XXXX in OUT's parent) and moved into OUT only when the whole run has
succeeded, so a failed or interrupted run leaves OUT as it was, and a run for a model with fewer
layers leaves no stale model_{L}.pt of an older one."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from ..convert.output_file import current_umask

_PREDICTOR = re.compile(r"model_\d+\.pt")


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A fresh staging folder for OUT, removed on exit; call commit(staging, out) to publish."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(20, "not a folder", str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    # mkdtemp makes the folder private (0700); a new OUT should get what a plain mkdir gives.
    os.chmod(staging, 0o777 & ~current_umask())
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def commit(staging: Path, out: Path) -> None:
    """Moves every file of staging into out, first removing the predictors of an older run;
    files of out that the trainer does not write are kept."""
    if not out.exists():
        os.replace(staging, out)
        return
    for old in out.iterdir():
        if _PREDICTOR.fullmatch(old.name) and old.is_file():
            old.unlink()
    for new in sorted(staging.iterdir()):
        os.replace(new, out / new.name)
    fd = os.open(out, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
