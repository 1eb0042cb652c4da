"""One pass over the corpus through the library: per layer, the predictor input (the residual
before ffn_norm) and the true activation mask of every token, and per neuron the number of tokens
where it fired (the planner's activation statistics).

The per-layer data go to files in a work folder (numpy memmaps: inputs as float16, masks packed
8 neurons a byte), so memory holds one window's trace at a time. Disk use per token is
n_layer * (2 * n_embd + n_ff / 8) bytes: about 560 KB for a 7B Llama (n_embd 4096, n_ff 11008,
32 layers), i.e. 56 GB for 100k tokens; training then loads one layer (about 1.7 GB for those
100k tokens). Size --max-tokens to the disk and memory at hand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np


@dataclass
class LayerData:
    """One layer's samples: rows [0, n_train) are training tokens, the rest held out."""

    inputs: np.ndarray  # [n_tokens, n_embd] float16
    masks: np.ndarray  # [n_tokens, ceil(n_ff / 8)] uint8, np.packbits(bitorder="little")
    n_train: int


@dataclass
class Collection:
    n_layer: int
    n_embd: int
    n_ff: int
    n_tokens: int
    n_train: int
    activation_counts: np.ndarray  # [n_layer, n_ff] float64
    work: Path

    def layer(self, index: int) -> LayerData:
        inputs = np.load(self.work / f"inputs_{index}.npy", mmap_mode="r")
        masks = np.load(self.work / f"masks_{index}.npy", mmap_mode="r")
        return LayerData(inputs=inputs, masks=masks, n_train=self.n_train)


def collect(ctx, windows: np.ndarray, held: np.ndarray, n_layer: int, n_embd: int, n_ff: int,
            work: Path, progress: Callable[[int, int], None]) -> Collection:
    """Traces every window; training windows' tokens are stored first, then the held-out ones
    (held[i]: window i is held out), so each split is one contiguous block of rows."""
    n_windows, n_ctx = windows.shape
    order = np.concatenate([np.flatnonzero(~held), np.flatnonzero(held)])
    n_tokens = n_windows * n_ctx
    n_train = int((~held).sum()) * n_ctx
    packed = (n_ff + 7) // 8
    inputs = [np.lib.format.open_memmap(work / f"inputs_{l}.npy", mode="w+", dtype=np.float16,
                                        shape=(n_tokens, n_embd)) for l in range(n_layer)]
    masks = [np.lib.format.open_memmap(work / f"masks_{l}.npy", mode="w+", dtype=np.uint8,
                                       shape=(n_tokens, packed)) for l in range(n_layer)]
    counts = np.zeros((n_layer, n_ff), dtype=np.float64)
    for row, w in enumerate(order):
        trace = ctx.trace_ffn(windows[w].tolist())
        rows = slice(row * n_ctx, (row + 1) * n_ctx)
        for l in range(n_layer):
            inputs[l][rows] = trace.inputs[l]
            masks[l][rows] = np.packbits(trace.active[l], axis=-1, bitorder="little")
        counts += trace.active.sum(axis=1)
        progress(row + 1, n_windows)
    for a in inputs + masks:
        a.flush()
    del inputs, masks
    return Collection(n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_tokens=n_tokens,
                      n_train=n_train, activation_counts=counts, work=work)
