"""The per-layer report: a table on stdout and report.json.

The held-out windows chose each layer's checkpoint, pos_weight and rank, so their scores are
"selection" figures, optimistic by construction; only the --eval-file scores (under "eval_file")
come from text that steered nothing."""

from __future__ import annotations

from typing import TextIO

from .fit import Fit
from .metrics import meets


def layer_row(layer: int, f: Fit, recall_target: float, max_ratio: float) -> dict:
    return {
        "layer": layer,
        "rank": f.rank,
        "selection": f.scores.as_dict(),
        "epochs": f.epochs,
        "pos_weight": f.pos_weight,
        "meets_targets": meets(f.scores, recall_target, max_ratio),
    }


def print_table(rows: list[dict], out: TextIO) -> None:
    """Selection scores, then (with --eval-file) the evaluation text's recall and ratio."""
    extra = "eval_file" in rows[0] if rows else False
    print((f"{'':>11} {'selection (held out; optimistic)':^48}"
           + (f" {'eval file':^22}" if extra else "")).rstrip(), file=out)
    print(f"{'layer':>5} {'rank':>5} {'recall':>8} {'precision':>9} {'true act':>9} "
          f"{'pred act':>9} {'ratio':>6} {'ok':>3}"
          + (f" {'recall':>11} {'ratio':>10}" if extra else ""), file=out)
    for r in rows:
        s = r["selection"]
        line = (f"{r['layer']:>5} {r['rank']:>5} {s['recall']:>8.4f} {s['precision']:>9.4f} "
                f"{s['true_active']:>9.4f} {s['predicted_active']:>9.4f} {s['ratio']:>6.2f} "
                f"{'yes' if r['meets_targets'] else 'no':>3}")
        if extra:
            e = r["eval_file"]
            line += f" {e['recall']:>11.4f} {e['ratio']:>10.2f}"
        print(line, file=out)
