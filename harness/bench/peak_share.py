"""What share of this machine's stored GEMM peak a cell reached (``bench.peak`` measures
and stores the peaks): a bench, micro or layer record's ``percent_of_peak``, and the rule
every table and record uses for a share too high to be true."""

from __future__ import annotations

from typing import Any

from dlbench.harness.stats import contended

# Two timings of the same kernel minutes apart differ with the clocks and the machine's other
# work: on an H100, micro's fp32 GEMM read 100.7 % of the peak measured 100 s before it
# (2026-11-26).  A share this close above 100 % is the peak within noise; beyond it the FLOP
# count or the peak is wrong, and the share is not a result.
PEAK_NOISE_PCT = 3.0


def beyond_peak(pct: float | None) -> bool:
    """Whether a share of peak is too high to be noise (every table and record asks this)."""
    return pct is not None and pct > 100 + PEAK_NOISE_PCT


# Which measured peak a cell's precision is compared with.
PEAK_PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "int8": "int8"}


def _peak_rows(
    store, machine_id: str, device: str, precision: str, threads: int | None
) -> list[dict[str, Any]]:
    where = "kind = 'peak' AND status = 'ok' AND machine_id = ? AND device = ? AND precision = ?"
    params: list[Any] = [machine_id, device, precision]
    if device == "cpu" and threads is not None:
        where += " AND intra_op_threads = ?"
        params.append(threads)
    return store.records(where, params)


def lookup(
    store, machine_id: str, device: str, precision: str, threads: int | None = None
) -> dict[str, Any] | None:
    """The best stored peak for this machine, device, precision and (on the CPU) thread
    count, or None.

    The same thread count, because a CPU's peak scales with its cores: a 1-thread cell
    divided by a 2-thread peak reads half of what it reached, and a 2-thread peak
    measured while other processes took the cores (threads spinning at a barrier)
    reads so low that a 1-thread cell lands above 100 %.  The best, not the newest:
    noise only ever slows a GEMM down, so a later measurement on a busy machine must
    not replace a truer one.
    """
    want = PEAK_PRECISION.get(precision)
    if want is None:
        return None
    rows = _peak_rows(store, machine_id, device, want, threads)
    if not rows:
        return None
    # A peak measured while others held the CPUs is only used when no quiet one exists.
    quiet = [r for r in rows if not contended(r["metrics"])]
    row = max(quiet or rows, key=lambda r: r["metrics"]["gflops"])
    return {
        "gflops": row["metrics"]["gflops"],
        "record_id": row["id"],
        "measured_at": row["started_at"],
        "threads": row.get("intra_op_threads"),
        "busy": contended(row["metrics"]),
    }


def share_of_peak(
    store, machine_id: str, device: str, precision: str, threads: int, achieved_gflops: float
) -> dict[str, Any]:
    """A cell's ``percent_of_peak`` fields, and a ``peak_note`` when there is no peak at its
    thread count or the share is beyond the peak and its noise (a wrong FLOP count or a wrong
    peak: never a result, and said so in the record)."""
    peak = lookup(store, machine_id, device, precision, threads)
    if not peak:
        others = PEAK_PRECISION.get(precision) and _peak_rows(
            store, machine_id, device, PEAK_PRECISION[precision], None
        )
        if not others:
            return {}
        return {
            "peak_note": f"no {device} peak measured at {threads} thread(s) on this "
            f"machine (dlbench env --peak --peak-threads {threads}): no % of "
            f"peak"
        }
    pct = 100 * achieved_gflops / peak["gflops"]
    out = {
        "peak_gflops": peak["gflops"],
        "peak_record_id": peak["record_id"],
        "peak_threads": peak["threads"],
        "percent_of_peak": pct,
        "above_peak": beyond_peak(pct),
    }
    if beyond_peak(pct):
        out["peak_note"] = (
            f"{achieved_gflops:.4g} GFLOP/s is {pct:.1f}% of the peak measured "
            f"at {peak['threads']} thread(s) ({peak['gflops']:.4g} GFLOP/s, "
            f"{peak['measured_at']}): more than {PEAK_NOISE_PCT:g} % above it means the "
            f"FLOP count or the peak is wrong (a peak measured on a busy machine reads "
            f"low); not a result"
        )
    elif peak["busy"]:
        out["peak_note"] = (
            f"the only {device} peak at {peak['threads']} thread(s) was measured while other "
            "processes held the CPUs: it reads low, so this share reads high (dlbench env "
            "--peak on an idle machine)"
        )
    return out


def missing_thread_counts(store, machine_id: str, thread_counts) -> tuple[list[int], float]:
    """Thread counts without a CPU peak, once this machine has any (``dlbench env --peak``
    opted in), and the seconds its newest peak was measured for; ([], 0) otherwise."""
    rows = _peak_rows(store, machine_id, "cpu", "fp32", None)
    if not rows:
        return [], 0.0
    have = {r.get("intra_op_threads") for r in rows}
    seconds = float(rows[-1]["metrics"].get("seconds") or 2.0)
    return sorted(set(thread_counts) - have), seconds
