"""Statistics over raw samples (pyperf's idea: keep the samples, derive on demand).

Percentiles use linear interpolation between closest ranks (numpy's default,
"type 7"), so hand computation can check them.
"""
from __future__ import annotations

import math
from typing import Sequence

# pyperf's thresholds on IQR / median.
FLUCTUATION = 0.10
UNSTABLE = 0.25


def percentile(samples: Sequence[float], q: float) -> float:
    if not samples:
        raise ValueError("no samples")
    if not 0 <= q <= 100:
        raise ValueError("q must be in [0, 100]")
    xs = sorted(samples)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> dict[str, float]:
    n = len(samples)
    if n == 0:
        raise ValueError("no samples")
    mean = sum(samples) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1)) if n > 1 else 0.0
    p25, p75 = percentile(samples, 25), percentile(samples, 75)
    median = percentile(samples, 50)
    return {
        "n": n,
        "mean": mean,
        "std": std,
        "cv": std / mean if mean else 0.0,
        "min": min(samples),
        "max": max(samples),
        "p50": median,
        "p90": percentile(samples, 90),
        "p95": percentile(samples, 95),
        "p99": percentile(samples, 99),
        "iqr": p75 - p25,
        "iqr_over_median": (p75 - p25) / median if median else 0.0,
    }
