"""The published inference table: one row per benchmark cell, with the marks that say
when a figure is not to be trusted (UNSTABLE, UNVERIFIED, INVALID share of peak)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness import stats
from dlbench.harness.bench.peak_share import PEAK_NOISE_PCT, beyond_peak
from dlbench.harness.output.tables import (
    ROUGH_P99,
    artifact_label,
    backend_label,
    cpu_mark,
    milliseconds,
    network_name,
)
from dlbench.harness.report.tables import (
    Table,
    failed_text,
    machine_ids,
    num,
    unit,
    with_allocator,
    with_machine,
)
from dlbench.harness.tune import headroom

ABOVE_PEAK = (
    f"† More than {PEAK_NOISE_PCT:g} % above the measured GEMM peak, beyond the noise between "
    "two timings of it: the FLOP count or the peak is wrong (most often a peak measured "
    "while other work loaded the machine, which reads low: measure it again on a quiet "
    "machine with dlbench env --peak). "
    "Not a result."
)
UNVERIFIED = (
    "UNVERIFIED: the file did not pass verification (dlbench build/verify): its "
    "outputs differ from its source's beyond tolerance, so its speed is not the "
    "speed of the model it claims to be."
)
ROUGH_P50 = f"* p50 from fewer than {stats.min_samples_for(50)} samples: a rough figure."


def artifact_verdict(
    record: dict[str, Any], verdicts: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The newest verdict on the benchmarked file's bytes (``verdicts``: sha256 -> row of
    the artifacts table), else the one the record took at bench time; None if never judged."""
    art = (record.get("context") or {}).get("artifact") or {}
    sha = art.get("sha256")
    if verdicts and sha and sha in verdicts:
        return verdicts[sha]
    return art.get("verification")


def _latency(lat: dict[str, Any], support: dict[str, bool]) -> str:
    return " / ".join(
        f"{milliseconds(lat.get(q))}{'' if support.get(q, True) else '*'}" for q in ("p50", "p99")
    )


def _unstable(m: dict[str, Any]) -> str:
    if "stability" in m:
        return stats.describe_stability(m["stability"])
    cv, limit = m.get("cv"), m.get("cv_threshold")  # records from before the IQR rule
    return "noisy" if cv is None or limit is None else f"CV {cv * 100:.3g}% > {limit * 100:.3g}%"


def inference(records: Sequence[dict[str, Any]], verdicts: dict[str, dict[str, Any]] | None = None) -> Table:
    records = sorted(
        (r for r in records if r["kind"] == "bench"),
        key=lambda r: (
            r.get("model") or "",
            artifact_label(r),
            r.get("backend") or "",
            r.get("device") or "",
            r.get("precision") or "",
            r.get("scenario") or "",
            r.get("batch_size") or 0,
            r["id"],
        ),
    )
    headers = [
        "Model",
        "Artifact",
        "Backend",
        "Device",
        "Precision",
        "Batch",
        "Scenario",
        "Throughput",
        "p50 / p99 latency",
        "% of peak",
    ]
    rows, rough, flags = [], set(), set()
    for r in records:
        m, c = r.get("metrics") or {}, r.get("context") or {}
        label = artifact_label(r)
        verdict = artifact_verdict(r, verdicts)
        if verdict is not None and not verdict.get("verified"):
            label = f"UNVERIFIED {label}"
            flags.add("unverified")
        head = [
            network_name(r.get("model")),
            label,
            backend_label(r),
            c.get("resource") or r.get("device"),
            r.get("precision"),
            r.get("batch_size"),
            r.get("scenario"),
        ]
        if r["status"] == "failed":
            rows.append(head + [failed_text(r), "", ""])
            continue
        thr = f"{num(r.get('throughput_sps'))} {unit(r)}"
        if r["status"] == "unstable":
            thr += f" (UNSTABLE: {_unstable(m)})"
        thr += cpu_mark(r)
        bound = (m.get("server") or {}).get("latency_bound_ms")
        if r.get("scenario") == "server" and bound:
            thr += f" at p99 <= {bound:g} ms"
        thr += headroom.text(r, mark=True)
        lat, support = m.get("latency_ms") or {}, m.get("percentile_support") or {}
        rough |= {q for q in ("p50", "p99") if lat and not support.get(q, True)}
        pct = m.get("percent_of_peak")
        peak = "" if pct is None else f"{pct:.1f}%"
        if beyond_peak(pct):
            peak = f"INVALID: {pct:.1f}%†"
            flags.add("above peak")
        rows.append(head + [thr, _latency(lat, support) if lat else "", peak])
    table = with_machine(
        with_allocator(Table("Inference", headers, rows, machine_ids(records)), records), records
    )
    table.notes += [note for q, note in (("p50", ROUGH_P50), ("p99", ROUGH_P99)) if q in rough]
    if any(r["status"] == "unstable" for r in records):
        table.notes.append(
            "UNSTABLE: the figure is stored, not trusted: the IQR / median of its per-iteration "
            "latencies exceeded --iqr-threshold (within a process), or the throughputs of its "
            "--repeats processes spread more than --repeat-spread-threshold (between processes)."
        )
    if "unverified" in flags:
        table.notes.append(UNVERIFIED)
    if "above peak" in flags:
        table.notes.append(ABOVE_PEAK)
    if headroom.below(records):
        table.notes.append(headroom.NOTE)
    return table
