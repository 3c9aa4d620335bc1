"""The report's "where the time goes" section: the stored ``dlbench profile`` records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness.output.tables import network_name
from dlbench.harness.report.tables import Table


def report_table(records: Sequence[dict[str, Any]]) -> Table:
    """The report's "where the time goes": one row a stored profile, its classes by share."""
    rows, machines = [], []
    for r in sorted((r for r in records if r["kind"] == "profile"), key=lambda r: r["id"]):
        p = (r.get("metrics") or {}).get("profile")
        if not p:
            continue
        machines.append(r["machine_id"])
        shares = ", ".join(f"{c['class']} {c['share']:.0%}" for c in p["classes"] if c["share"] >= 0.02)
        path = ((r.get("context") or {}).get("artifact") or {}).get("path") or ""
        rows.append(
            [
                network_name(r.get("model")),
                path.rsplit("/", 1)[-1],
                r.get("batch_size"),
                r.get("intra_op_threads"),
                f"{p['wall_ms_per_run']:.3g}",
                shares,
            ]
        )
    return Table(
        "Where the time goes (dlbench profile)",
        ["Network", "File", "Batch", "Threads", "ms / run", "Time by op class"],
        rows,
        list(dict.fromkeys(machines)),
        [PROFILE_NOTE] if rows else [],
    )


PROFILE_NOTE = (
    "ONNX Runtime's profiler, warm-up excluded; classes under 2 % left out "
    "(dlbench profile FILE: every class and node)."
)
