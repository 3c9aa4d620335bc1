"""Micro records as a Markdown table: one row per cell, in plan order."""

from __future__ import annotations

from typing import Any

from dlbench.harness.bench.peak_share import beyond_peak
from dlbench.harness.output.tables import markdown

HEADERS = ["Op", "Engine", "Precision", "Threads", "With", "GFLOP/s", "GB/s", "% of peak", "p50 ms", "Status"]


def _best_stream(records) -> dict[tuple, float]:
    """The best GB/s of any memory stream per (device, threads): the bandwidth ceiling the
    streams are put against (this machine's, as measured in these records)."""
    best: dict[tuple, float] = {}
    for r in records:
        if r["status"] != "failed" and r["context"]["op"]["kind"] == "memory":
            key = (r["device"], r["intra_op_threads"])
            best[key] = max(best.get(key, 0.0), r["metrics"]["gbps"])
    return best


def _op(r: dict[str, Any]) -> str:
    mode = r["context"].get("mode")
    return r["model"] + (f" ({mode})" if mode else "")


def first_line(error: str | None) -> str:
    """An engine's message can run to a C++ call stack; a table cell takes its first line."""
    return (error or "").strip().splitlines()[0] if (error or "").strip() else "unknown error"


def _fmt(x: float | None, digits: str = ".4g") -> str:
    return "-" if x is None else format(x, digits)


def micro_table(records: list[dict[str, Any]]) -> str:
    return markdown(HEADERS, micro_rows(records))


def micro_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per micro or layer record, in the order given."""
    best = _best_stream(records)
    rows = []
    for r in records:
        m, ctx = r.get("metrics") or {}, r["context"]
        if r["status"] == "failed":
            rows.append(
                [
                    _op(r),
                    r["backend"],
                    r["precision"],
                    r["intra_op_threads"],
                    ctx.get("with") or "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "FAILED: " + first_line(r["error"]),
                ]
            )
            continue
        if ctx["op"]["kind"] == "memory":
            ceiling = best.get((r["device"], r["intra_op_threads"]))
            share = f"{100 * m['gbps'] / ceiling:.0f}% of best stream" if ceiling else "-"
        else:
            share = _fmt(m.get("percent_of_peak"), ".0f") + (
                " (above the measured peak: not a result, see the record's note)"
                if beyond_peak(m.get("percent_of_peak"))
                else ""
            )
        status = r["status"] + (
            " (" + ", ".join(ctx["runtime"].get("notes") or []) + ")" if ctx["runtime"].get("notes") else ""
        )
        agreement = m.get("agreement") or {}
        if agreement.get("reference") and agreement["reference"] != r["backend"]:
            status += (
                f"; = {agreement['reference']} ("
                + ", ".join(f"{k} {v:.1g}" for k, v in agreement.items() if k != "reference")
                + ")"
            )
        elif agreement:
            status += "; reference"
        rows.append(
            [
                _op(r),
                f"{r['backend']} {r.get('backend_version') or ''}".strip(),
                r["precision"],
                r["intra_op_threads"],
                ctx.get("with") or "-",
                _fmt(m.get("gflops")),
                _fmt(m.get("gbps")),
                share,
                _fmt((m.get("latency_ms") or {}).get("p50"), ".3g"),
                status,
            ]
        )
    return rows
