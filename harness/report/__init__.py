"""Stored records as the tables and charts people publish.

``render`` is what `dlbench report` wraps; the three table functions and
``markdown_report`` are what `dlbench run` prints at its end.  Nothing here
imports a framework, and matplotlib only when a chart is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.report.conversion import conversion
from dlbench.harness.report.inference import inference
from dlbench.harness.report.markdown import markdown_report
from dlbench.harness.report.tables import machines_for, to_markdown, training
from dlbench.harness.store.results import ResultStore

FORMATS = ("md", "html", "csv", "json")

__all__ = ["FORMATS", "render", "markdown_report", "training_table", "inference_table", "conversion_table"]


def training_table(
    records: Sequence[dict[str, Any]], machines: dict[str, dict[str, Any]] | None = None
) -> str:
    """Markdown, in the MindSpore benchmark page's layout, with the machine line under it.
    Without ``machines`` the fingerprint is this machine's own (records just measured)."""
    return to_markdown(training(records), machines_for(records, machines))


def inference_table(
    records: Sequence[dict[str, Any]],
    machines: dict[str, dict[str, Any]] | None = None,
    verdicts: dict[str, dict[str, Any]] | None = None,
) -> str:
    return to_markdown(inference(records, verdicts), machines_for(records, machines))


def conversion_table(
    records: Sequence[dict[str, Any]], machines: dict[str, dict[str, Any]] | None = None
) -> str:
    return to_markdown(conversion(records), machines_for(records, machines))


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UserError(f"unknown report format {fmt!r}; choose from: {', '.join(FORMATS)}")
    return fmt


def render(
    store: ResultStore,
    run_ids: Sequence[str] | None = None,
    model: str | None = None,
    fmt: str = "md",
    latest: bool = False,
    title: str | None = None,
) -> str:
    """The report over the selected records, as text in ``fmt`` (md, html, csv, json)."""
    from dlbench.harness.report.select import select, verdicts
    from dlbench.harness.tune.headroom import annotate

    check_format(fmt)
    records, machines = select(store, run_ids, model, latest)
    annotate(records, store)  # each bench row's distance from a tuned best
    if fmt == "md":
        return markdown_report(
            records, machines, verdicts=verdicts(store, records), **({"title": title} if title else {})
        )
    if fmt == "html":
        from dlbench.harness.report.html import html_report

        return html_report(records, machines, verdicts=verdicts(store, records))
    from dlbench.harness.report.export import csv_text, json_text

    return csv_text(records) if fmt == "csv" else json_text(records)
