"""The published conversion table: every export, build and verification with its verdict
and its worst output (largest difference, lowest cosine and top-1)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dlbench.harness.output.tables import network_name
from dlbench.harness.report.tables import Table, failed_text, machine_ids, with_machine


def outputs_of(metrics: dict[str, Any]) -> dict[str, Any]:
    return metrics.get("outputs") or (metrics.get("verdict") or {}).get("outputs") or {}


def hop_of(record: dict[str, Any]) -> str:
    c = record.get("context") or {}
    if c.get("hop"):
        return c["hop"]
    ref, cand = (c.get("reference") or {}).get("kind"), (c.get("candidate") or {}).get("kind")
    return f"verify {ref} -> {cand}" if ref and cand else record["kind"]


def _file(record: dict[str, Any]) -> str:
    c = record.get("context") or {}
    path = (c.get("artifact") or c.get("candidate") or {}).get("path") or ""
    return os.path.basename(path.rstrip("/"))


def worst(outputs: Sequence[dict[str, Any]], key: str, pick) -> float | None:
    values = [o[key] for o in outputs if o.get(key) is not None]
    return pick(values) if values else None


def conversion(records: Sequence[dict[str, Any]]) -> Table:
    records = [r for r in records if r["kind"] in ("convert", "verify")]
    headers = [
        "Model",
        "Hop",
        "Artifact",
        "Precision",
        "Max abs diff",
        "Cosine",
        "Top-1 agreement",
        "Verdict",
    ]
    rows = []
    for r in records:
        outs = list(outputs_of(r.get("metrics") or {}).values())
        head = [network_name(r.get("model")), hop_of(r), _file(r), r.get("precision") or ""]
        if r["status"] == "failed" or not outs:
            rows.append(head + ["", "", "", failed_text(r)])
            continue
        max_abs = worst(outs, "max_abs", max)
        cosine = worst(outs, "cosine", min)
        top1 = worst(outs, "top1", min)
        verdict = "ok" if r["status"] == "ok" else f"{r['status'].upper()}: {r.get('error') or ''}"
        rows.append(
            head
            + [
                "" if max_abs is None else f"{max_abs:.3g}",
                "" if cosine is None else f"{cosine:.6f}",
                "" if top1 is None else f"{top1:.1%}",
                verdict.strip(),
            ]
        )
    table = with_machine(Table("Conversion", headers, rows, machine_ids(records)), records)
    if any(len(outputs_of(r.get("metrics") or {})) > 1 for r in records):
        table.notes.append(
            "Several outputs: the worst of them (largest difference, lowest cosine and top-1)."
        )
    return table
