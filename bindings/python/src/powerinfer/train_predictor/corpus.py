"""The corpus as the library tokenizes it, cut into windows the way the model reads text: n_ctx
tokens each, BOS in the first slot (as pi-perplexity scores text), interleaved into training and
held-out windows so that both see the whole corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from .. import Error

_PIECE_CHARS = 1 << 20  # tokenized a piece at a time: a large corpus is never one string


class CorpusError(Exception):
    pass


def _cut(text: str) -> int:
    """Where a piece ends: after the last newline, else after the last space or tab (text
    without newlines), so no word is split; the whole text once what would be carried over
    reaches a piece (a "word" that long is not text), which bounds a piece at two."""
    cut = text.rfind("\n") + 1 or max(text.rfind(" "), text.rfind("\t")) + 1
    return len(text) if len(text) - cut >= _PIECE_CHARS else cut


def _pieces(path: Path) -> Iterator[str]:
    """The text in pieces of one to two MiB of characters."""
    with open(path, encoding="utf-8", errors="strict") as f:
        carry = ""
        while True:
            block = f.read(_PIECE_CHARS)
            if not block:
                break
            text = carry + block
            cut = _cut(text)
            carry = text[cut:]
            if cut:
                yield text[:cut]
        if carry:
            yield carry


def read_tokens(model, path: Path, max_tokens: int) -> np.ndarray:
    """At most max_tokens ids of the text (no BOS: the windows put it in)."""
    parts: list[np.ndarray] = []
    total = 0
    try:
        for piece in _pieces(path):
            try:
                ids = np.asarray(model.tokenize(piece, add_bos=False), dtype=np.int32)
            except Error as e:
                raise CorpusError(f"{path}: {e}") from None
            parts.append(ids)
            total += ids.size
            if total >= max_tokens:
                break
    except OSError as e:
        raise CorpusError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text (byte {e.start})") from None
    if not parts:
        raise CorpusError(f"{path}: empty corpus")
    return np.concatenate(parts)[:max_tokens]


def windows(tokens: np.ndarray, n_ctx: int, bos: int) -> np.ndarray:
    """[n_windows, n_ctx]: consecutive slices of the text, BOS replacing each one's first token;
    the tail shorter than a window is dropped."""
    n = tokens.size // n_ctx
    out = tokens[: n * n_ctx].reshape(n, n_ctx).copy()
    if bos >= 0:
        out[:, 0] = bos
    return out


def is_held_out(n_windows: int, fraction: float) -> np.ndarray:
    """Window i is held out when the running count floor(i * fraction) steps up: an even
    interleaving (e.g. every tenth window for 0.1), so held-out text spans the corpus."""
    i = np.arange(n_windows)
    return np.floor((i + 1) * fraction) > np.floor(i * fraction)
