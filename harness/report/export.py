"""Records for spreadsheets (CSV: one flat row per record) and for programs (JSON: as stored)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from dlbench.harness.report.conversion import hop_of, outputs_of, worst
from dlbench.harness.report.tables import devices
from dlbench.harness.store.results import COLUMNS


def _key_metrics(r: dict[str, Any]) -> dict[str, Any]:
    """The figures people sort and plot by, lifted out of the nested JSON."""
    m, c = r.get("metrics") or {}, r.get("context") or {}
    lat = m.get("latency_ms") or {}
    step = m.get("step_time_s") or {}
    ev = m.get("eval") or {}
    outs = list(outputs_of(m).values())
    verdict = m.get("verdict") or {}
    return {
        "resource": c.get("resource"),
        "devices": devices(r) if r["kind"] == "train" else None,
        "hop": hop_of(r) if r["kind"] in ("convert", "verify") else None,
        "latency_mean_ms": lat.get("mean"),
        "latency_p50_ms": lat.get("p50"),
        "latency_p90_ms": lat.get("p90"),
        "latency_p99_ms": lat.get("p99"),
        "cv": m.get("cv"),
        "gflops_per_sample": m.get("gflops_per_sample"),
        "achieved_gflops": m.get("achieved_gflops"),
        "percent_of_peak": m.get("percent_of_peak"),
        "step_time_p50_s": step.get("p50"),
        "step_time_p90_s": step.get("p90"),
        "loss_start": m.get("loss_start"),
        "loss_end": m.get("loss_end"),
        "eval_loss": ev.get("loss"),
        "eval_accuracy": ev.get("accuracy"),
        "max_abs": worst(outs, "max_abs", max),
        "cosine": worst(outs, "cosine", min),
        "top1": worst(outs, "top1", min),
        "verified": verdict.get("ok") if verdict else None,
    }


def csv_text(records: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    fields = ["id", *COLUMNS, *_key_metrics({"kind": "", "metrics": {}, "context": {}})]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in records:
        row = {k: r.get(k) for k in ("id", *COLUMNS)}
        row.update(_key_metrics(r))
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def json_text(records: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(records), indent=2, sort_keys=True, default=str) + "\n"
