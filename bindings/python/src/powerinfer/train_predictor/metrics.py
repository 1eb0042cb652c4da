"""Quality of a predictor on held-out tokens, counted over every (token, neuron) pair."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    total: int = 0

    def add(self, tp: int, fp: int, fn: int, total: int) -> None:
        self.tp += tp
        self.fp += fp
        self.fn += fn
        self.total += total

    def scores(self) -> "Scores":
        positives = self.tp + self.fn
        predicted = self.tp + self.fp
        return Scores(
            recall=self.tp / positives if positives else 1.0,
            precision=self.tp / predicted if predicted else 1.0,
            true_active=positives / self.total if self.total else 0.0,
            predicted_active=predicted / self.total if self.total else 0.0,
        )


@dataclass(frozen=True)
class Scores:
    recall: float
    precision: float
    true_active: float
    """Fraction of (token, neuron) pairs truly active."""
    predicted_active: float
    """Fraction the predictor selects (score >= threshold): what sparse inference computes."""

    @property
    def ratio(self) -> float:
        """Predicted over true active fraction."""
        return self.predicted_active / self.true_active if self.true_active else float("inf")

    def as_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


def meets(s: Scores, recall_target: float, max_ratio: float) -> bool:
    return s.recall >= recall_target and s.ratio <= max_ratio
