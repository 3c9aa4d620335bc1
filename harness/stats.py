"""Statistics over raw samples (pyperf's idea: keep the samples, derive on demand).

Percentiles use linear interpolation between closest ranks (numpy's default,
"type 7"), so hand computation can check them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# torch.utils.benchmark's thresholds on IQR / median (pyperf's idea of warning in the result).
FLUCTUATION = 0.10
UNSTABLE = 0.25

# Stability rules (``stability``).  Within one process: IQR / median of per-iteration
# latency above FLUCTUATION.  Robust where the coefficient of variation is not: one
# 10x-slow iteration in ten raises the CV past 100 % but leaves the IQR where it was.
WITHIN_PROCESS_THRESHOLD = FLUCTUATION
# Between fresh processes (``--repeats``): (max - min) / median of per-process throughput
# above 5 %, the tolerance MLPerf's compliance TEST05 gives a rerun of an offline or
# server result.  The range, not the MAD: at three processes the MAD ignores one process
# that is far from the other two, which is exactly what this rule must catch.
BETWEEN_PROCESSES_THRESHOLD = 0.05
# Other processes' (or the hypervisor's) share of a cell's CPUs while it measured
# (``harness.cells.cpuusage``): above 10 % the figure is theirs as much as the cell's; on an
# idle machine the rest (the parent waiting, the kernel's threads) stays near 1 %.
CONTENDED_BOUND = 0.10


def contended(metrics: dict[str, Any]) -> bool:
    """Whether a record's metrics (a cell's or a peak's) say others held its CPUs."""
    return (metrics.get("contended_share") or 0.0) > CONTENDED_BOUND


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


def median(samples: Sequence[float]) -> float:
    return percentile(samples, 50)


def mad(samples: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled): robust spread of repeats."""
    m = median(samples)
    return median([abs(x - m) for x in samples])


def relative_mad(samples: Sequence[float]) -> float:
    """MAD / median: how far repeats of one measurement typically land from each other."""
    m = median(samples)
    return mad(samples) / m if m else 0.0


def range_over_median(samples: Sequence[float]) -> float:
    """(max - min) / median: the largest relative difference between two of the samples."""
    m = median(samples)
    return (max(samples) - min(samples)) / m if m else 0.0


def stability(
    within: float | None,
    processes: Sequence[float] = (),
    *,
    within_threshold: float = WITHIN_PROCESS_THRESHOLD,
    between_threshold: float = BETWEEN_PROCESSES_THRESHOLD,
) -> dict[str, Any]:
    """Is a measurement stable?  Two rules, each on a robust statistic:

    * ``within``: IQR / median of one process's per-iteration latencies (with several
      processes, the median of theirs), against ``within_threshold``;
    * ``processes``: the throughputs of fresh processes of the same cell; with two or
      more, (max - min) / median against ``between_threshold``.

    ``rule`` says which flagged it: "within_process", "between_processes", "both" or None.
    """
    between = range_over_median(processes) if len(processes) >= 2 else None
    flagged = [
        name
        for name, value, limit in (
            ("within_process", within, within_threshold),
            ("between_processes", between, between_threshold),
        )
        if value is not None and value > limit
    ]
    return {
        "rule": "both" if len(flagged) == 2 else (flagged[0] if flagged else None),
        "unstable": bool(flagged),
        "within_process": within,
        "between_processes": between,
        "threshold": {"within_process": within_threshold, "between_processes": between_threshold},
        "statistic": {
            "within_process": "IQR / median of per-iteration latency",
            "between_processes": "(max - min) / median of per-process throughput",
        },
        "processes": len(processes),
    }


def describe_stability(s: dict[str, Any] | None) -> str:
    """Why a measurement is unstable, in a few words ("IQR/median 14% > 10%")."""
    if not s:
        return "noisy"
    limits, parts = s.get("threshold") or {}, []
    for key, text in (
        ("within_process", "IQR/median"),
        ("between_processes", f"spread of {s.get('processes')} processes"),
    ):
        value, limit = s.get(key), limits.get(key)
        if value is not None and limit is not None and value > limit:
            parts.append(f"{text} {value * 100:.3g}% > {limit * 100:.3g}%")
    return "; ".join(parts) or "noisy"


# Confidence that the largest of n samples lies above the true q-quantile
# (1 - q**n).  At 99.9 % this asks for 66 samples for p90 and 688 for p99,
# close to MLPerf LoadGen's early-stopping minimums (64 and 662).
PERCENTILE_CONFIDENCE = 0.999


def min_samples_for(q: float, confidence: float = PERCENTILE_CONFIDENCE) -> int:
    """Fewest samples for which the q-th percentile (0-100) is more than a guess."""
    if not 0 < q < 100:
        raise ValueError("q must be in (0, 100)")
    return math.ceil(math.log(1 - confidence) / math.log(q / 100))


def percentile_support(n: int, qs: Sequence[float] = (50, 90, 95, 99)) -> dict[str, bool]:
    """Which percentiles ``n`` samples can honestly claim (see ``min_samples_for``)."""
    return {f"p{q:g}": n >= min_samples_for(q) for q in qs}


def window_throughput(items: int, window_s: float) -> float:
    """Items processed in a measured window over the window's wall time.

    Not 1 / mean latency: gaps between iterations (Python, host work) count,
    as they do for a user who runs the loop.
    """
    if window_s <= 0:
        raise ValueError("window must be longer than zero seconds")
    return items / window_s
