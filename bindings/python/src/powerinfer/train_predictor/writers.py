"""The trainer's outputs, each written to a temporary file beside it and renamed when complete:
model_{L}.pt (PowerInfer's predictor layout, which powerinfer-convert reads), config.json,
activation_stats.gguf (the planner's statistics) and report.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..convert.dtypes import GGML_F32
from ..convert.gguf_writer import U32, U64, GGUFWriter, write_padding
from ..convert.output_file import commit, temporary_beside


STATS_ARCH = "powerinfer.activation_stats"


def write_predictor(out: Path, layer: int, state: dict) -> None:
    import torch

    path = out / f"model_{layer}.pt"
    with temporary_beside(path) as tmp:
        torch.save(state, tmp)
        commit(tmp, path)


def write_json(path: Path, value: dict) -> None:
    with temporary_beside(path) as tmp:
        tmp.write_text(json.dumps(value, indent=1) + "\n")
        commit(tmp, path)


def write_activation_stats(path: Path, counts: np.ndarray, n_tokens: int) -> None:
    """Our statistics GGUF: blk.N.activation_count F32 [n_ff], the tokens where each neuron of
    layer N was truly active, over n_tokens tokens."""
    w = GGUFWriter()
    w.add_string("general.architecture", STATS_ARCH)
    w.add_scalar(f"{STATS_ARCH}.block_count", U32, counts.shape[0])
    w.add_scalar(f"{STATS_ARCH}.tokens", U64, n_tokens)
    rows = [np.ascontiguousarray(c, dtype="<f4") for c in counts]
    for layer, row in enumerate(rows):
        w.add_tensor(f"blk.{layer}.activation_count", (row.size,), GGML_F32, row.nbytes)
    with temporary_beside(path) as tmp:
        with open(tmp, "wb") as f:
            w.write_header(f)
            for row in rows:
                f.write(row.tobytes())
                write_padding(f, row.nbytes)
        commit(tmp, path)


