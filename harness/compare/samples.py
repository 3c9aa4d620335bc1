"""Per-iteration throughput samples from a stored record.

A record's headline throughput is one number; a confidence interval needs the
spread behind it, which the raw per-iteration timings that every record keeps
provide.  Each iteration becomes one throughput sample (samples per second),
so train and bench records are compared on the same scale.
"""
from __future__ import annotations

from typing import Any

# Fewer than this and the bootstrap only reshuffles a handful of values.
MIN_SAMPLES = 3


def throughput_samples(record: dict[str, Any]) -> tuple[list[float] | None, str | None]:
    """(samples, None), or (None, why there are none: "failed" or a few words)."""
    if record.get("status") == "failed":
        return None, "failed"
    m = record.get("metrics") or {}
    batch = record.get("batch_size") or m.get("batch_size")
    if not batch:
        return None, "batch size unknown"
    if record.get("kind") == "train":
        times, scale = m.get("step_times_s"), 1.0
    elif record.get("kind") == "bench":
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
