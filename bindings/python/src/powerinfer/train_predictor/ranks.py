"""The rank of each layer's predictor: given, or "auto", the smallest of a list of candidates
whose predictor reaches the recall target on held-out text with a predicted active fraction at
most max_ratio times the true one, found by bisection (about log2(len(list)) + 1 fits)."""

from __future__ import annotations

from .fit import Fit, FitOptions, LayerTensors, fit
from .metrics import meets


def candidates(n_embd: int, n_ff: int) -> list[int]:
    """n_embd/16, /8, /4, /2 and n_embd, never above min(n_embd, n_ff), nor under 8 unless
    n_ff is."""
    top = min(n_embd, n_ff)
    return sorted({min(top, max(8, n_embd // d)) for d in (16, 8, 4, 2, 1)})


def choose(data: LayerTensors, ranks: list[int], opt: FitOptions, max_ratio: float, log) -> Fit:
    """Bisects the ascending candidates (a larger rank predicts at least as well) for the
    smallest that meets the targets; when none does, the fit closest to them (reaching the
    recall target with the least predicted fraction, else the highest recall)."""
    tried: dict[int, Fit] = {}
    lo, hi = 0, len(ranks) - 1
    best: Fit | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        result = tried[ranks[mid]] = fit(data, ranks[mid], opt, log)
        if meets(result.scores, opt.recall_target, max_ratio):
            best = result
            hi = mid - 1
        else:
            lo = mid + 1
    if best is not None:
        return best
    reaching = [f for f in tried.values() if f.scores.recall >= opt.recall_target]
    if reaching:
        return min(reaching, key=lambda f: f.scores.predicted_active)
    return max(tried.values(), key=lambda f: f.scores.recall)
