"""The inference table, in the seed pages' layout, next to the training table.

Flags go on the row as a short mark, their explanation once under the table:
a p99 from too few samples (*), an unstable cell, a kernel-bound cell
(``harness.cells.cpuusage``: its CPU time went to the kernel, usually page faults).
An Allocator column appears when the rows ran with different allocators.  A row that a
``dlbench tune`` has a best for says how far it is from it (``harness.tune.headroom``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness.bench.peak_share import beyond_peak
from dlbench.harness.output.footnotes import footnote_long_cells
from dlbench.harness.output.tables import (
    ROUGH_P99,
    add_context_columns,
    artifact_label,
    backend_label,
    cpu_mark,
    cpu_note,
    markdown,
    milliseconds,
    network_name,
)
from dlbench.harness.tune import headroom

BENCH_HEADERS = (
    "Network",
    "Artifact",
    "Backend",
    "Resource",
    "Precision",
    "Batch size",
    "Scenario",
    "Throughput (samples/sec)",
    "Latency p50 / p99",
    "Spread",
    "GFLOP/s (% peak)",
    "Load / first run",
    "Peak RSS",
)


def bench_rows(records: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for r in records:
        m, c = r.get("metrics") or {}, r.get("context") or {}
        backend = backend_label(r)
        resource = c.get("resource") or r.get("device")
        rss = f"{r['peak_rss_mb']:.0f} MB" if r.get("peak_rss_mb") else ""
        head = [
            network_name(r.get("model")),
            artifact_label(r),
            backend,
            resource,
            r.get("precision"),
            r.get("batch_size"),
            r.get("scenario"),
        ]
        if r["status"] == "failed":
            rows.append(head + [f"FAILED: {r.get('error')}", "", "", "", "", rss])
            continue
        lat = m.get("latency_ms") or {}
        support = m.get("percentile_support") or {}
        p99 = milliseconds(lat.get("p99")) + ("" if support.get("p99", True) else "*")
        gflops = ""
        uncounted = len((m.get("flops") or {}).get("uncounted") or [])
        if m.get("achieved_gflops"):
            gflops = f"{m['achieved_gflops']:.4g}"
            if m.get("percent_of_peak") is not None:
                pct = m["percent_of_peak"]
                gflops += f" (INVALID: {pct:.0f}% of peak)" if beyond_peak(pct) else f" ({pct:.0f}%)"
        if uncounted:  # shapes left unknown: the count is a lower bound
            gflops = f">= {gflops or 0} (partial: {uncounted} nodes uncounted)"
        cold = m.get("cold_start") or {}
        thr = f"{r['throughput_sps']:.4g}" if r.get("throughput_sps") is not None else "-"
        if r["status"] == "unstable":
            thr += " (unstable)"
        thr += cpu_mark(r)
        if r.get("scenario") == "server" and (m.get("server") or {}).get("latency_bound_ms"):
            thr += f" @ p99 <= {m['server']['latency_bound_ms']:g} ms"
        thr += headroom.text(r)
        rows.append(
            head
            + [
                thr,
                f"{milliseconds(lat.get('p50'))} / {p99}" if lat else "-",
                spread(m),
                gflops,
                f"{cold.get('load_s', 0):.2f} s / {milliseconds(cold.get('first_inference_ms'))}"
                if cold
                else "",
                rss,
            ]
        )
    return rows


def spread(m: dict[str, Any]) -> str:
    """What the stability rule judged: IQR / median of the iterations, and with --repeats
    the range / median of the processes' throughputs (the old CV for older records)."""
    if m.get("iqr_over_median") is None:
        return f"CV {m['cv']:.1%}" if m.get("cv") is not None else "-"
    text = f"IQR {m['iqr_over_median']:.1%}"
    between = (m.get("repeat_spread") or {}).get("range_over_median")
    return text + (f", processes {between:.1%}" if between is not None else "")


def bench_table(records: Sequence[dict[str, Any]]) -> str:
    headers, rows = list(BENCH_HEADERS), bench_rows(records)
    add_context_columns(headers, rows, records)
    rows, numbered = footnote_long_cells(rows)  # an engine's error: a note, as in reports
    text = "\n\n".join([markdown(headers, rows), *numbered])
    if any(
        not ((r.get("metrics") or {}).get("percentile_support") or {}).get("p99", True)
        for r in records
        if r["status"] != "failed"
    ):
        text += "\n\n" + ROUGH_P99
    note = cpu_note(records)
    if note:
        text += "\n\n" + note
    return text


def server_points_table(record: dict[str, Any]) -> str:
    server = (record.get("metrics") or {}).get("server") or {}
    rows = [
        [
            f"{p['target_qps']:.4g}",
            f"{p['achieved_qps']:.4g}",
            p["queries"],
            f"{p['mean_batch']:.2f}",
            *(milliseconds(p["latency_ms"][q]) for q in ("p50", "p90", "p99")),
            {True: "yes", False: "no"}.get(p.get("meets_bound"), "-"),
        ]
        for p in server.get("points", [])
        if p.get("latency_ms")
    ]
    return markdown(
        ("Target QPS", "Achieved QPS", "Queries", "Mean batch", "p50", "p90", "p99", "Meets bound"), rows
    )
