"""Is the candidate really faster? A bootstrap interval on the ratio of medians.

Medians, because per-iteration timings have long right tails (a page fault, a
scheduler hiccup) that move a mean but not a median.  Each side is resampled
on its own (the two runs are independent), the ratio of the resampled medians
is taken, and its percentiles bound the ratio.  Iterations of one run are not
quite independent (drift, thermal state), so an interval from iterations is a
floor on the uncertainty, not a ceiling; with ``--repeats`` the samples are
per-process throughputs instead (``compare.samples``).  That is what
``min_effect`` is for: two processes running the same cell differ by some
percent however many iterations each ran (the noise floor, measured per
machine by ``dlbench compare --calibrate``: ``compare.noise``), so a change
smaller than it is "within noise" however narrow its interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from dlbench.harness import stats

FASTER, SLOWER, NOISE = "faster", "slower", "within noise"
# Bounds the memory of one vectorized block of resamples (float64 elements).
_BLOCK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class RatioEstimate:
    ratio: float  # median(candidate) / median(baseline)
    low: float
    high: float
    confidence: float
    resamples: int
    n_baseline: int
    n_candidate: int
    verdict: str

    def to_dict(self) -> dict:
        return asdict(self)


def verdict(ratio: float, low: float, high: float, min_effect: float = 0.0) -> str:
    """Faster when the interval is above 1 and the ratio beyond 1 + min_effect; slower
    when below 1 and the ratio under 1 / (1 + min_effect): symmetric, so swapping the
    sides swaps the verdict, and a floor above 100 % still lets a 10x slowdown show."""
    if low > 1 and ratio > 1 + min_effect:
        return FASTER
    if high < 1 and ratio < 1 / (1 + min_effect):
        return SLOWER
    return NOISE


def _resampled_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    n = len(x)
    block = max(1, _BLOCK_ELEMENTS // n)
    out = np.empty(resamples)
    for start in range(0, resamples, block):
        k = min(block, resamples - start)
        out[start : start + k] = np.median(x[rng.integers(0, n, size=(k, n))], axis=1)
    return out


def bootstrap_ratio(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    min_effect: float = 0.0,
) -> RatioEstimate:
    """Ratio of medians candidate / baseline (of throughputs: > 1 is faster) and its
    percentile-bootstrap interval at ``confidence``; seeded, so reruns agree."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if resamples < 100:
        raise ValueError("at least 100 resamples")
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("no samples")
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("throughput samples must be positive")
    rng = np.random.default_rng(seed)
    ratios = _resampled_medians(b, resamples, rng) / _resampled_medians(a, resamples, rng)
    tail = (1 - confidence) / 2 * 100
    ratios = ratios.tolist()
    low = stats.percentile(ratios, tail)
    high = stats.percentile(ratios, 100 - tail)
    ratio = stats.median(list(b)) / stats.median(list(a))
    return RatioEstimate(
        ratio, low, high, confidence, resamples, len(a), len(b), verdict(ratio, low, high, min_effect)
    )
