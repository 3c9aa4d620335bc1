"""What ``dlbench run`` prints at its end, and the reports it leaves in its work
directory: its stages, then the training, conversion and inference tables of
every record the run stored (resumptions included), read back from the
database, so the printout is what ``dlbench report --run ID`` shows."""

from __future__ import annotations

from typing import Any

from dlbench.harness.output.footnotes import footnote_long_cells
from dlbench.harness.output.tables import markdown

STAGE_HEADERS = ("Stage", "Status", "Time", "Artifact", "Reason")


def stage_table(results: dict[str, dict[str, Any]]) -> str:
    """One row a stage; a long reason (a skipped backend's why, a failure's error) is a
    numbered note under the table, so the Reason column stays on the page."""
    rows = []
    for name, r in results.items():
        seconds = r.get("seconds")
        artifact = r.get("artifacts") or {}
        rows.append(
            [
                name,
                r["status"],
                "" if seconds is None else f"{seconds:.1f} s",
                artifact.get("path")
                or artifact.get("checkpoint_dir")
                or (f"{artifact['cells']} cells" if "cells" in artifact else ""),
                r.get("reason") or "",
            ]
        )
    rows, notes = footnote_long_cells(rows)
    return "\n\n".join([markdown(STAGE_HEADERS, rows), *notes])


def run_tables(req, workdir, run_id: str, results: dict[str, dict[str, Any]]) -> tuple[str, bool]:
    """The printout, and whether anything that could run here failed.

    Also writes ``report.md`` and ``report.html`` (charts) into the work directory.
    """
    from dlbench.core.atomic import write_text
    from dlbench.harness.machine.frameworks import is_installed
    from dlbench.harness.report import render
    from dlbench.harness.store.results import ResultStore

    store = ResultStore(req.db)
    title = f"dlbench run {req.model}: run {run_id}"
    stored = bool(store.records("run_id = ?", [run_id]))
    # A run whose every stage failed before storing a record still reports its stages.
    report = render(store, run_ids=[run_id], title=title) if stored else f"# {title}\n\nNo records stored."
    text = "\n".join([report.rstrip(), "", "## Stages", "", stage_table(results), ""])
    advice = [line for r in results.values() for line in r.get("advice") or ()]
    if advice:  # the precision advisor's lines (pipeline.bench_stage)
        text += "\n".join(["", "## Advice", "", *(f"- {line}" for line in advice), ""])
    write_text(workdir.root / "report.md", text)
    notes = [f"report: {workdir.root / 'report.md'}"]
    if stored and is_installed("matplotlib"):
        write_text(workdir.root / "report.html", render(store, run_ids=[run_id], fmt="html"))
        notes.append(f"charts: {workdir.root / 'report.html'}")
    elif stored:
        notes.append("no HTML report: matplotlib is not installed (pip install 'dlbench[report]')")
    bench = store.records("run_id = ? AND kind = 'bench'", [run_id])
    failed = any(r["status"] == "failed" for r in results.values())
    failed = failed or any(r["status"] == "failed" for r in bench)
    return text + "\n" + "\n".join(notes), failed
