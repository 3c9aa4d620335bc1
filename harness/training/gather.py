"""A data-parallel cell's figures from every rank's (``ranks`` runs each rank).

Throughput is global samples over the span from the earliest rank's window
start to the latest rank's window end (wall clock, gathered through the
framework's own collective), not a sum of per-rank rates: a slow rank holds
every other one up at each all-reduce, and the span shows that.  Every
rank's step times are kept, with their min and max, so a straggler is visible
rather than averaged away; and the ranks must end with the same weights, or
the cell was not data-parallel training at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbench.harness import stats
from dlbench.harness.cells.cell import own_peak_rss_mb

# Each rank's gathered row: these columns (a wall-clock time as three float32-exact
# parts, ``_split``), then its measured step times from STEPS on.
RANK, START, END, WINDOW, DATA, RSS, LOSS, WEIGHTS = 0, slice(1, 4), slice(4, 7), 7, 8, 9, 10, 11
STEPS = 12
# How far ranks' weight sums may differ (relative) and still count as one model: all-reduce
# sums in a different order on each rank, float32 rounding apart.
SYNC_TOLERANCE = 1e-5


def _split(epoch: float) -> list[float]:
    """A wall-clock time as three parts each exact in float32: some collectives carry
    float64 as float32 (MindSpore's CPU AllReduce), whose 24 bits would round today's
    epoch seconds to 128 s."""
    whole = np.floor(epoch)
    return [float(np.floor(whole / 1e6)), float(whole % 1e6), float(epoch - whole)]


def _joined(parts) -> np.ndarray:
    return parts[:, 0].astype(np.float64) * 1e6 + parts[:, 1] + parts[:, 2]


def combine(session, metrics: dict[str, Any], start: float, end: float) -> dict[str, Any]:
    """The cell's figures from every rank's (gathered on every rank, so each node's first
    rank can report them)."""
    times = metrics["step_times_s"]
    row = np.array(
        [
            session.rank,
            *_split(start),
            *_split(end),
            metrics["window_s"],
            sum(metrics["data_time_s"]),
            own_peak_rss_mb() or 0.0,
            metrics["loss_end"],
            session.weights_sum(),
            *times,
        ],
        np.float64,
    )
    table = session.all_gather(row)
    table = table[np.argsort(table[:, RANK])]
    starts, ends = _joined(table[:, START]), _joined(table[:, END])
    ranks = []
    for r, t0, t1 in zip(table, starts, ends):
        s = stats.summarize(list(r[STEPS:]))
        ranks.append(
            {
                "rank": int(r[RANK]),
                "start_s": t0 - starts.min(),
                "end_s": t1 - starts.min(),
                "window_s": r[WINDOW],
                "data_s": r[DATA],
                "peak_rss_mb": r[RSS],
                "loss_end": r[LOSS],
                "step_time_s": {k: s[k] for k in ("min", "p50", "max")},
            }
        )
    world = len(ranks)
    sums = table[:, WEIGHTS]
    drift = float((sums.max() - sums.min()) / max(abs(sums).max(), 1e-30))
    if drift > SYNC_TOLERANCE:
        raise RuntimeError(
            f"the ranks' weights differ after training (relative {drift:.2g}): "
            f"their gradients were not averaged, so this was not "
            f"data-parallel training"
        )
    span = ends.max() - starts.min()
    batch = session.cfg.batch_size
    samples = world * len(times) * batch
    # A step ends when its slowest rank ends it: the all-reduce waits for that one.
    slowest = table[:, STEPS:].max(axis=0).tolist()
    summary = stats.summarize(slowest)
    return {
        "world_size": world,
        "global_batch": world * batch,
        "throughput_sps": samples / (span - max(r["data_s"] for r in ranks)),
        "throughput_with_data_sps": samples / span,
        "window_s": span,
        "rank_throughput_sps": metrics["throughput_sps"],
        "step_times_s": slowest,
        "step_time_s": {k: summary[k] for k in ("mean", "p50", "p90", "min", "max", "std")},
        "step_time_cv": summary["cv"],
        "ranks": ranks,
        "weights_drift": drift,
        "rank_step_time_min_s": min(r["step_time_s"]["min"] for r in ranks),
        "rank_step_time_max_s": max(r["step_time_s"]["max"] for r in ranks),
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in ranks),
        "peak_rss_mb_sum": sum(r["peak_rss_mb"] for r in ranks),
    }
