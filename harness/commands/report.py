"""Turn stored records into the tables and charts people publish: Markdown tables
in the seed pages' layout (training, inference, conversion), each with the machine
and library versions it was measured with; one self-contained HTML file with the
tables and charts; or CSV / JSON of the records. Default: every run in the
database. Exit status: 0 written, 2 bad input (no database, no such run, no
records, an unwritable --out, an unknown format)."""

from __future__ import annotations

import sys
from pathlib import Path

HELP = "tables and charts from stored results (Markdown, HTML, CSV, JSON)"

SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".csv": "csv", ".json": "json"}


def add_arguments(p) -> None:
    p.add_argument("--db", help="results database (default $DLBENCH_DB or results/dlbench.sqlite)")
    p.add_argument(
        "--run",
        action="append",
        metavar="ID",
        dest="runs",
        help="a run id (repeat for several; default every run)",
    )
    p.add_argument(
        "--latest", action="store_true", help="only the newest run (of those given with --run, if any)"
    )
    p.add_argument("--model", help="only this model's records")
    p.add_argument(
        "--format", dest="fmt", help="md, html, csv or json (default: from --out's suffix, else md)"
    )
    p.add_argument("--out", help="write here (atomically) instead of stdout")


def run(args) -> int:
    from dlbench.core.atomic import check_can_create, write_text
    from dlbench.harness.report import check_format, render
    from dlbench.harness.store.results import ResultStore

    fmt = args.fmt or (SUFFIXES.get(Path(args.out).suffix.lower(), "md") if args.out else "md")
    check_format(fmt)
    if args.out:
        check_can_create(args.out)
    text = render(ResultStore(args.db), run_ids=args.runs, model=args.model, fmt=fmt, latest=args.latest)
    if args.out:
        write_text(args.out, text)
        print(f"wrote {fmt} report to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
