"""A one-line progress bar on stderr, redrawn at most ten times a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, enabled: bool, stream: TextIO = sys.stderr):
        self.total, self.label, self.enabled, self.stream = max(total, 1), label, enabled, stream
        self.done = 0
        self.start = time.monotonic()
        self._drawn = 0.0

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.1 or self.done >= self.total):
            self._drawn = now
            self._draw(now)

    def fraction(self, f: float) -> None:
        self.advance(int(f * self.total) - self.done)

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0)
        filled = int(frac * 30)
        rate = self.done / max(now - self.start, 1e-9) / 1e6
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {frac * 100:5.1f}% {self.done / 1e6:9.1f} MB {rate:7.1f} MB/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
