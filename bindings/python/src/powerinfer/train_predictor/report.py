"""The per-layer report: a table on stdout and report.json."""

from __future__ import annotations

from typing import TextIO

from .fit import Fit
from .metrics import meets


def layer_row(layer: int, f: Fit, recall_target: float, max_ratio: float) -> dict:
    return {
        "layer": layer,
        "rank": f.rank,
        **f.scores.as_dict(),
        "epochs": f.epochs,
        "pos_weight": f.pos_weight,
        "meets_targets": meets(f.scores, recall_target, max_ratio),
    }


def print_table(rows: list[dict], out: TextIO) -> None:
    print(f"{'layer':>5} {'rank':>5} {'recall':>8} {'precision':>9} {'true act':>9} "
          f"{'pred act':>9} {'ratio':>6} {'ok':>3}", file=out)
    for r in rows:
        print(f"{r['layer']:>5} {r['rank']:>5} {r['recall']:>8.4f} {r['precision']:>9.4f} "
              f"{r['true_active']:>9.4f} {r['predicted_active']:>9.4f} {r['ratio']:>6.2f} "
              f"{'yes' if r['meets_targets'] else 'no':>3}", file=out)
