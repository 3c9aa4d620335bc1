"""The report's "where the time goes" section: the stored ``dlbench profile`` records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness.output.tables import network_name
from dlbench.harness.report.tables import Table


def report_table(records: Sequence[dict[str, Any]]) -> Table:
    """The report's "where the time goes": one row a stored profile, its classes by share."""
    rows, machines, profilers = [], [], []
    for r in sorted((r for r in records if r["kind"] == "profile"), key=lambda r: r["id"]):
        p = (r.get("metrics") or {}).get("profile")
        if not p:
            continue
        machines.append(r["machine_id"])
        # Profiles stored before PyTorch's were all ONNX Runtime's.
        profilers.append(p.get("profiler") or "ONNX Runtime's profiler")
        shares = ", ".join(f"{c['class']} {c['share']:.0%}" for c in p["classes"] if c["share"] >= 0.02)
        artifact = (r.get("context") or {}).get("artifact") or {}
        path = artifact.get("path") or ""
        on = " ".join(str(x) for x in (r.get("backend"), r.get("device"), r.get("precision")) if x)
        rows.append(
            [
                network_name(r.get("model")),
                path.rsplit("/", 1)[-1] or artifact.get("label") or "",
                on,
                r.get("batch_size"),
                r.get("intra_op_threads"),
                f"{p['wall_ms_per_run']:.3g}",
                shares,
            ]
        )
    return Table(
        "Where the time goes (dlbench profile)",
        ["Network", "Model", "Run on", "Batch", "Threads", "ms / run", "Time by op class"],
        rows,
        list(dict.fromkeys(machines)),
        [_capitalized(PROFILE_NOTE.format(" and ".join(dict.fromkeys(profilers))))] if rows else [],
    )


PROFILE_NOTE = (
    "{}, warm-up excluded; classes under 2 % left out "
    "(dlbench profile MODEL: every class, and the slowest nodes)."
)


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]
