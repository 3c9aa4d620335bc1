"""The site's figures, from a real run: ``make docs-figures`` (``python -m
dlbench.harness.docs.figures docs/figures``).

A pasted screenshot of a table shows what some old version printed on some machine;
these are what this version prints.  The run is small on purpose (the MLP ``compare
--calibrate`` measures, and its INT8 build, on ONNX Runtime at a few batch sizes, then
the INT8 build profiled: well under a minute on two cores), and goes through the CLI as
a user's would, into a private database.  The charts are the report's own
(``harness.report.plots``), the tables ``dlbench report``'s Markdown and ``dlbench
profile``'s output as printed.

The site build does not run this: its output is committed, with ``made.txt`` saying
which command, version and machine made it, so a fresh clone builds the site offline
and in seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

BATCH_SIZES = "1,4,16,64"
# The files the pages show: (name, the report's chart function).
CHARTS = (
    ("throughput-vs-batch.svg", "throughput_vs_batch"),
    ("latency-vs-throughput.svg", "latency_throughput"),
)
TABLES = "report.txt"  # dlbench report's Markdown, included in a page (pymdownx.snippets)
PROFILE = "profile.txt"  # dlbench profile's output, included in the profile how-to
# A batch whose QGemm time is not all dispatch, on one thread so the shares hold across machines.
PROFILE_ARGS = ("--batch-size", "16", "--threads", "1")
MADE = "made.txt"


def _dlbench(cwd: Path, db: Path, *args: str) -> str:
    """What ``dlbench ARGS`` printed on stdout, where it succeeded."""
    env = dict(os.environ, DLBENCH_DB=str(db))
    proc = subprocess.run(
        [sys.executable, "-m", "dlbench.harness", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"dlbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def make(out: Path, min_duration: float = 1.0) -> list[Path]:
    """Run the small sweep and write the figures, the tables and ``made.txt`` into ``out``."""
    from dlbench.core.version import __version__
    from dlbench.harness.compare.noise import builtin_model
    from dlbench.harness.report import plots, render
    from dlbench.harness.report.figures import svg
    from dlbench.harness.report.select import select
    from dlbench.harness.store.results import ResultStore

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        work, db = Path(tmp), Path(tmp) / "results.sqlite"
        builtin_model(work / "mlp.onnx")
        _dlbench(work, db, "build", "mlp.onnx", "--to", "int8", "--quiet")
        bench = ["-b", "onnxruntime", "--batch-sizes", BATCH_SIZES, "--min-duration", str(min_duration)]
        _dlbench(work, db, "bench", "mlp.onnx", "mlp.int8.onnx", *bench, "--quiet")
        # A database of its own: the report's tables above are the sweep's alone.
        profiled = _dlbench(work, work / "profile.sqlite", "profile", "mlp.int8.onnx", *PROFILE_ARGS)
        (out / PROFILE).write_text(profiled.strip() + "\n")
        store = ResultStore(db)
        records, _ = select(store, None, None, False)
        for name, chart in CHARTS:
            made = getattr(plots, chart)(records)
            figure = made[0].figure() if made and made[0].figure else None
            if figure is None:
                raise SystemExit(f"the report drew no {chart} chart from the run")
            (out / name).write_bytes(svg(figure))
            written.append(out / name)
        (out / TABLES).write_text(_demoted(render(store, fmt="md")))
        written += [out / TABLES, out / PROFILE]
    (out / MADE).write_text(
        f"Made by `make docs-figures` (dlbench {__version__}) on the machine the tables name: the MLP "
        f"`dlbench compare --calibrate` measures and its INT8 build, benchmarked on ONNX "
        f"Runtime at batch sizes {BATCH_SIZES.replace(',', ', ')}; the INT8 build profiled with "
        f"`dlbench profile mlp.int8.onnx {' '.join(PROFILE_ARGS)}`.\n"
    )
    return [*written, out / MADE]


def _demoted(markdown: str) -> str:
    """The report's headings two levels down, so they nest under the page's own."""
    return "\n".join("##" + line if line.startswith("#") else line for line in markdown.splitlines()) + "\n"


if __name__ == "__main__":
    for path in make(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/figures")):
        print(f"wrote {path}")
