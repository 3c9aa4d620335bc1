"""The whole report as Markdown: what `dlbench report` prints and `dlbench run` ends with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness.bench.table import server_points_table
from dlbench.harness.output.tables import network_name
from dlbench.harness.report.conversion import conversion
from dlbench.harness.report.inference import inference
from dlbench.harness.report.profiles import report_table
from dlbench.harness.report.tables import Table, machines_for, micro, to_markdown, training

# The report's sections in order, each a function of the records (inference also takes
# the newest verdicts): what the Markdown and the HTML report both walk.
SECTIONS = (training, inference, micro, conversion, report_table)


def _section(table: Table, machines) -> list[str]:
    return [f"## {table.title}", "", to_markdown(table, machines), ""]


def runs_line(records: Sequence[dict[str, Any]]) -> str:
    runs = list(dict.fromkeys(r["run_id"] for r in records))
    shown = ", ".join(runs) if len(runs) <= 6 else f"{', '.join(runs[:3])}, ..., {runs[-1]}"
    return f"{len(records)} records from {len(runs)} run(s): {shown}"


def server_sections(records: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(heading, record) for every server-scenario cell that stored latency-throughput points."""
    out = []
    for r in records:
        if (
            r["kind"] == "bench"
            and r["status"] != "failed"
            and ((r.get("metrics") or {}).get("server") or {}).get("points")
        ):
            out.append(
                (
                    f"Server scenario: {network_name(r.get('model'))} on {r.get('backend')} "
                    f"{r.get('device')} {r.get('precision')}, max batch {r.get('batch_size')} "
                    f"(run {r['run_id']})",
                    r,
                )
            )
    return out


def markdown_report(
    records: Sequence[dict[str, Any]],
    machines: dict[str, dict[str, Any]] | None = None,
    title: str = "dlbench report",
    verdicts: dict[str, dict[str, Any]] | None = None,
) -> str:
    """``verdicts``: sha256 -> newest artifacts row (``select.verdicts``), so a file judged
    after it was benchmarked is marked too."""
    machines = machines_for(records, machines)
    lines = [f"# {title}", "", runs_line(records), ""]
    for build in SECTIONS:
        table = inference(records, verdicts) if build is inference else build(records)
        if table.rows:
            lines += _section(table, machines)
        if build is inference:
            for heading, r in server_sections(records):
                lines += [f"### {heading}", "", server_points_table(r), ""]
    return "\n".join(lines).rstrip() + "\n"
