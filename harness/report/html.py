"""The report as ONE HTML file that opens offline: inline CSS, PNG charts as data URIs.

The only script is a few inline lines that record, on <body>, how many charts the
browser decoded: a headless browser test reads it back from the DOM.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import Any

from dlbench.harness.bench.table import server_points_table
from dlbench.harness.report.inference import inference
from dlbench.harness.report.markdown import SECTIONS, runs_line, server_sections
from dlbench.harness.report.plots import all_plots
from dlbench.harness.report.tables import legible, machine_line, machines_for

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 0.5em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td { max-width: 32em; overflow-wrap: anywhere; }
th { background: #eef2f7; }
td.bad { color: #a40000; font-weight: 600; }
p.machine, p.note { font-size: 12px; color: #555; max-width: 80em; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""

COUNT_DECODED = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  document.body.setAttribute("data-images-total", String(imgs.length));
  document.body.setAttribute("data-images-decoded",
    String(imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length));
});
"""


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    bad = text.startswith(("FAILED", "UNVERIFIED", "INVALID")) or "(UNSTABLE" in text
    cls = ' class="bad"' if bad else ""
    return f"<td{cls}>{html.escape(text)}</td>"


def _table(headers: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _markdown_table(text: str) -> str:
    """A table that harness.output.tables.markdown rendered (pipes never occur inside its cells)."""
    lines = [ln.strip().strip("|").split("|") for ln in text.splitlines() if ln.startswith("|")]
    return _table([c.strip() for c in lines[0]], [[c.strip() for c in ln] for ln in lines[2:]])


def html_report(
    records: Sequence[dict[str, Any]],
    machines: dict[str, dict[str, Any]] | None = None,
    title: str = "dlbench report",
    verdicts: dict[str, dict[str, Any]] | None = None,
) -> str:
    machines = machines_for(records, machines)
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(runs_line(records))}</p>"]
    for build in SECTIONS:
        table = inference(records, verdicts) if build is inference else build(records)
        if not table.rows:
            continue
        table = legible(table)
        parts += [f"<h2>{html.escape(table.title)}</h2>", _table(table.headers, table.rows)]
        parts += [f'<p class="note">{html.escape(n)}</p>' for n in table.notes]
        parts += [
            f'<p class="machine">Measured on {html.escape(machine_line(mid, machines.get(mid)))}</p>'
            for mid in table.machine_ids
        ]
        if build is inference:
            for heading, r in server_sections(records):
                parts += [f"<h3>{html.escape(heading)}</h3>", _markdown_table(server_points_table(r))]
    parts.append("<h2>Charts</h2>")
    for plot in all_plots(records):
        parts.append(f"<h3>{html.escape(plot.title)}</h3>")
        if plot.svg is None:
            parts.append(f'<p class="note">Skipped: {html.escape(plot.note)}.</p>')
            continue
        data = base64.b64encode(plot.svg).decode("ascii")
        parts.append(f'<img alt="{html.escape(plot.title)}" src="data:image/svg+xml;base64,{data}">')
        if plot.note:
            parts.append(f'<p class="note">{html.escape(plot.note)}</p>')
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n"
        f"<script>{COUNT_DECODED}</script>\n</head>\n<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n"
    )
