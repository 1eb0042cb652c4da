"""powerinfer-train-predictor: trains PowerInfer's activation predictors for a ReLU model.

    powerinfer-train-predictor -m model.dense.gguf -f corpus.txt -o model-predictor/

Reads, through the library (:meth:`powerinfer.Context.trace_ffn`), every layer's predictor input
and true activation mask over a corpus; trains per layer a Deja Vu-style low-rank predictor
``fc2 · relu(fc1 · x)`` whose raw scores are logits (active where score >= threshold); writes
``model_{L}.pt`` and ``config.json`` where ``powerinfer-convert`` reads them, the planner's
activation statistics, and a report of recall and precision (on the held-out text that chose
each fit, and on an --eval-file that steered nothing). See
docs/predictor-training.md.

torch is imported only when training runs (``pip install powerinfer[train]``):
``import powerinfer`` never imports it.
"""

from __future__ import annotations

from typing import Optional, Sequence

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    from .cli import main as run

    return run(argv)
