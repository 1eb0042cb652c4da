"""Training one layer's predictor, aimed at recall.

Loss: binary cross-entropy on the scores as logits shifted by the threshold (score - T), so the
engine's decision score >= T is the classifier's boundary, with the positive (active) class
weighted by pos_weight (5 to start with: where the fixture's layers settle, whether 7% or 41% of
their neurons fire). Each epoch ends with the held-out recall at T: while it is under the target
the weight grows (x1.5), when it is well over (by 0.01) it shrinks (/1.15), steering the
boundary to the target. The checkpoint kept is the one of least predicted active fraction among
those reaching the target (or, while none does, the one of highest recall); training stops after
`patience` epochs without a better one, or after `epochs`."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from .collect import LayerData
from .metrics import Counts, Scores
from .predictor import LowRankPredictor


@dataclass(frozen=True)
class FitOptions:
    threshold: float = 0.0
    recall_target: float = 0.95
    pos_weight: float = 5.0
    epochs: int = 10
    patience: int = 3
    batch: int = 1024
    lr: float = 2e-3
    seed: int = 0
    dtype: torch.dtype = torch.float16


@dataclass
class Fit:
    rank: int
    predictor: LowRankPredictor
    scores: Scores
    epochs: int
    pos_weight: float


class LayerTensors:
    """A layer's samples in memory: inputs as float32 [n_tokens, n_embd], masks unpacked to
    bool [n_tokens, n_ff] (1 byte a neuron: for 100k tokens of a 7B layer, 1.6 GB + 1.1 GB)."""

    def __init__(self, data: LayerData, n_ff: int) -> None:
        self.x = torch.from_numpy(np.asarray(data.inputs, dtype=np.float32))
        bits = np.unpackbits(data.masks, axis=1, count=n_ff, bitorder="little")
        self.m = torch.from_numpy(bits.view(np.bool_))
        self.n_train = data.n_train
        self.n_ff = n_ff

    def input_scale(self) -> torch.Tensor:
        """Per-channel RMS of the training inputs (1 where a channel is all zero)."""
        rms = self.x[: self.n_train].double().pow(2).mean(0).sqrt().float()
        return torch.where(rms > 0, rms, torch.ones_like(rms))

    def batch(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[rows], self.m[rows].float()


@torch.no_grad()
def evaluate(model: LowRankPredictor, data: LayerTensors, threshold: float,
             batch: int = 4096) -> Scores:
    counts = Counts()
    n = data.x.shape[0]
    for s in range(data.n_train, n, batch):
        x = data.x[s:min(n, s + batch)]
        y = data.m[s:min(n, s + batch)]
        p = model(x) >= threshold
        counts.add(int((p & y).sum()), int((p & ~y).sum()), int((~p & y).sum()), y.numel())
    return counts.scores()


def _better(a: Scores, b: Scores | None, target: float) -> bool:
    if b is None:
        return True
    if (a.recall >= target) != (b.recall >= target):
        return a.recall >= target
    if a.recall >= target:
        return a.predicted_active < b.predicted_active
    return a.recall > b.recall


def fit(data: LayerTensors, rank: int, opt: FitOptions, log) -> Fit:
    torch.manual_seed(opt.seed)
    n_embd = data.x.shape[1]
    model = LowRankPredictor(n_embd, data.n_ff, rank, data.input_scale())
    optim = torch.optim.Adam([model.fc1.weight, model.fc2.weight], lr=opt.lr)
    gen = torch.Generator().manual_seed(opt.seed)
    pos_weight = opt.pos_weight
    best: Fit | None = None
    stale = 0
    for epoch in range(1, opt.epochs + 1):
        loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos_weight))
        order = torch.randperm(data.n_train, generator=gen)
        total = 0.0
        for s in range(0, data.n_train, opt.batch):
            x, y = data.batch(order[s:s + opt.batch])
            loss = loss_fn(model(x) - opt.threshold, y)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            total += loss.item() * x.shape[0]
        # judged as written: weights rounded to the output type
        written = copy.deepcopy(model)
        written.load_exported(model.exported(opt.dtype))
        scores = evaluate(written, data, opt.threshold)
        log(f"  rank {rank} epoch {epoch}: loss {total / data.n_train:.4f} pos_weight "
            f"{pos_weight:.2f} recall {scores.recall:.4f} precision {scores.precision:.4f} "
            f"predicted {scores.predicted_active:.4f} true {scores.true_active:.4f}")
        if _better(scores, best.scores if best else None, opt.recall_target):
            best = Fit(rank, written, scores, epoch, pos_weight)
            stale = 0
        else:
            stale += 1
            if stale >= opt.patience:
                break
        if scores.recall < opt.recall_target:
            pos_weight *= 1.5
        elif scores.recall > opt.recall_target + 0.01:
            pos_weight /= 1.15
    assert best is not None
    return best
