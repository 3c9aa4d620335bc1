"""Throughput samples from a stored record: per process when it has enough, else per iteration.

A record's headline throughput is one number; a confidence interval needs the
spread behind it.  The honest spread is between fresh processes (``dlbench
bench --repeats``): each has its own memory layout, thread placement and
turbo state, which iterations of one process share, so an interval from
iterations alone is too narrow.  With at least ``MIN_PROCESSES`` processes
their throughputs are the samples; otherwise the raw per-iteration timings
every record keeps are, each iteration one throughput sample (samples per
second), so train and bench records are compared on the same scale.
"""

from __future__ import annotations

from typing import Any

# Fewer than this and the bootstrap only reshuffles a handful of values.
MIN_SAMPLES = 3
# Per-process throughputs are the samples from this many processes on.
MIN_PROCESSES = 3
PROCESSES, ITERATIONS = "processes", "iterations"


def process_samples(record: dict[str, Any]) -> list[float] | None:
    """The throughputs of a cell's ``--repeats`` processes, when it has ``MIN_PROCESSES``."""
    if (
        record.get("status") == "failed"
        or record.get("kind") != "bench"
        or record.get("scenario") == "server"
    ):
        return None
    repeats = (record.get("metrics") or {}).get("repeats") or []
    thr = [float(r["throughput_sps"]) for r in repeats if (r.get("throughput_sps") or 0) > 0]
    return thr if len(thr) >= MIN_PROCESSES else None


def throughput_samples(record: dict[str, Any]) -> tuple[list[float] | None, str | None]:
    """(samples, None), or (None, why there are none: "failed" or a few words)."""
    if record.get("status") == "failed":
        return None, "failed"
    m = record.get("metrics") or {}
    batch = record.get("batch_size") or m.get("batch_size")
    if not batch:
        return None, "batch size unknown"
    if record.get("kind") == "train":
        # A data-parallel step moves every rank's batch (its step time is the slowest rank's).
        batch = m.get("global_batch") or batch
        times, scale = m.get("step_times_s"), 1.0
    elif record.get("kind") in ("bench", "micro"):  # micro: one call per iteration
        if record.get("scenario") == "server":
            # Per-query latencies include queueing: batch / latency is no throughput.
            return None, "server scenario: latencies are per query"
        times, scale = m.get("latency_samples_ms"), 1000.0
    else:
        return None, f"a {record.get('kind')} record"
    if not times:
        return None, "none recorded"
    times = [float(t) for t in times if t is not None and float(t) > 0]
    if len(times) < MIN_SAMPLES:
        return None, f"only {len(times)}"
    return [batch * scale / t for t in times], None
