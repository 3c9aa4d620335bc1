"""``dlbench report`` stays legible at 30+ artifacts, over REAL records: 30 tiny ONNX
files (two with long names) and one that the engine fails on benchmarked in one CLI
command, and a real failed verification, then the report's Markdown, HTML and charts
measured: no table cell longer than ``CELL_CHARS`` (the long texts are numbered notes
under their table), no legend over a chart's data, no two labels over each other,
crowded charts split by model with every series in one of the parts."""

from __future__ import annotations

import math
import re

import pytest

from dlbench.harness.output.footnotes import CELL_CHARS, footnote_long_cells
from dlbench.harness.report import figures
from dlbench.harness.report.plots import all_plots, fields
from dlbench.harness.report.select import select
from dlbench.harness.store.results import ResultStore
from tests.utils.clitools import run_cli

ARTIFACTS = 30
LONG_NAMES = (
    "resnet50_exported_from_the_training_checkpoint_of_week_12_opset17",
    "resnet50_exported_from_the_training_checkpoint_of_week_12_opset18",
)
QUICK = ("--batch-sizes", "1", "--iterations", "3", "--warmup", "1", "--threads", "1", "--no-progress")
MAX_FIGURE_IN = 10  # a chart taller than a page is not one a reader takes in


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    """The database, its records, and every chart's Figure, drawn once for the module."""

    from tests.utils import tiny_onnx

    tmp = tmp_path_factory.mktemp("crowded")
    db = tmp / "results.sqlite"

    def cli(*args, ok=(0,)):
        res = run_cli(*args, env={"DLBENCH_DB": str(db)}, cwd=tmp)
        assert res.returncode in ok, (args, res.stderr[-3000:])
        return res

    names = [f"net{i:02d}" for i in range(ARTIFACTS - len(LONG_NAMES))] + list(LONG_NAMES)
    files = [tiny_onnx.save(tiny_onnx.classifier(seed=i), tmp / f"{n}.onnx") for i, n in enumerate(names)]
    files.append(tiny_onnx.save(tiny_onnx.fails_at_run(), tmp / "fails_at_run.onnx"))
    benched = cli("bench", *files, "-b", "onnxruntime", *QUICK, ok=(0, 1))  # 1: the failing file
    bad = tiny_onnx.scale_initializer(tiny_onnx.classifier(seed=0), "fc", 3.0)
    cli("verify", files[0], tiny_onnx.save(bad, tmp / "bad.onnx"), ok=(1,))
    cli("report", "--out", str(tmp / "report.md"))
    cli("report", "--out", str(tmp / "report.html"))
    records, _ = select(ResultStore(db))
    plots = all_plots(records)
    drawn = []
    for plot in plots:
        if plot.figure is not None:
            fig = plot.figure()
            fig.canvas.draw()
            drawn.append((plot, fig))
    return {"tmp": tmp, "records": records, "plots": plots, "drawn": drawn, "bench": benched.stdout}


def _tables(text: str) -> list[tuple[list[list[str]], list[str]]]:
    """Every Markdown table as its rows of cells (separator row left out) with the
    paragraphs under it, up to the next heading."""
    out: list[tuple[list[list[str]], list[str]]] = []
    current, previous = None, ""
    for line in text.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                out.append(([], []))
                current = out[-1]
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if not set("".join(cells)) <= {"-"}:
                current[0].append(cells)
        elif line.startswith("#"):
            current = None
        elif current is not None and line:
            current[1].append(line)
        previous = line
    return out


def _note(notes: list[str], cell: str) -> str:
    """The note a shortened cell's marker points to ("FAILED [2]" -> note 2's text)."""
    number = re.fullmatch(r".*\[(\d+)\]", cell)
    assert number, cell
    (text,) = [n for n in notes if n.startswith(f"[{number.group(1)}] ")]
    return text.split(" ", 1)[1]


def _flat(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------- tables


def test_markdown_tables_keep_cells_short_and_every_long_text_as_a_note(crowded):
    text = (crowded["tmp"] / "report.md").read_text()
    tables = _tables(text)
    assert tables, text[:2000]
    for rows, notes in tables:
        width = len(rows[0])
        assert all(len(r) == width for r in rows), "a row with a different number of cells"
        for row in rows:
            for cell in row:
                assert len(cell) <= CELL_CHARS, cell
                if re.search(r"\[\d+\]$", cell):
                    assert _note(notes, cell)  # every marker has its note

    # The engine's own error (hundreds of characters) and the verification's reasons.
    bench = {r["model"]: r for r in crowded["records"] if r["kind"] == "bench"}
    failed = bench["fails_at_run"]
    assert failed["status"] == "failed" and len(failed["error"]) > 3 * CELL_CHARS
    (verify,) = [r for r in crowded["records"] if r["kind"] == "verify"]
    assert verify["status"] == "unverified" and len(verify["error"]) > CELL_CHARS
    found = {}
    for rows, notes in tables:
        header = rows[0]
        for row in rows[1:]:
            cells = dict(zip(header, row))
            if cells.get("Model") == "fails_at_run":
                found["error"] = (cells["Throughput"], _note(notes, cells["Throughput"]))
            if cells.get("Hop", "").startswith("verify"):
                found["verdict"] = (cells["Verdict"], _note(notes, cells["Verdict"]))
    assert found["error"][0].startswith("FAILED [")
    assert found["error"][1] == _flat(f"FAILED: {failed['error']}")
    assert found["verdict"][0].startswith("UNVERIFIED [")
    assert found["verdict"][1] == _flat(f"UNVERIFIED: {verify['error']}")
    # one row per benchmarked artifact: nothing was dropped to make the table fit
    inference = next(rows for rows, _ in tables if rows[0][:2] == ["Model", "Artifact"])
    assert len(inference) - 1 == len(bench) == ARTIFACTS + 1


def test_the_bench_command_prints_its_table_by_the_same_rule(crowded):
    """What ``dlbench bench`` prints is the first table a user reads: an engine's error of
    hundreds of characters made every row that wide."""
    [(rows, notes)] = [t for t in _tables(crowded["bench"]) if t[0][0][:1] == ["Network"]]
    assert all(len(cell) <= CELL_CHARS for row in rows for cell in row), rows
    failed = next(r for r in crowded["records"] if r["kind"] == "bench" and r["status"] == "failed")
    cells = next(dict(zip(rows[0], row)) for row in rows[1:] if row[0] == "fails_at_run")
    marked = next(cell for cell in cells.values() if re.search(r"\[\d+\]$", cell))
    assert _flat(failed["error"]) in _note(notes, marked)


def test_html_tables_hold_the_same_short_cells_and_notes(crowded):
    import html as html_lib

    page = (crowded["tmp"] / "report.html").read_text()
    cells = [html_lib.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", page, re.S)]
    assert len(cells) > ARTIFACTS * 10
    assert max(len(c) for c in cells) <= CELL_CHARS
    (failed,) = [r for r in crowded["records"] if r["kind"] == "bench" and r["status"] == "failed"]
    notes = [html_lib.unescape(n) for n in re.findall(r'<p class="note">(.*?)</p>', page, re.S)]
    full = _flat(f"FAILED: {failed['error']}")
    assert any(re.fullmatch(r"\[\d+\] (.*)", n, re.S).group(1) == full for n in notes if n.startswith("["))


def test_the_footnote_rule_numbers_each_distinct_text_once():
    long_error = "FAILED: " + "the engine could not allocate its arena " * 3
    prose = "a reason that is long enough to need a note, written as plain words " * 2
    rows, notes = footnote_long_cells([["a", long_error], ["b", long_error], ["c", prose], ["d", "short"]])
    assert [r[1] for r in rows] == ["FAILED [1]", "FAILED [1]", rows[2][1], "short"]
    head, tail = rows[2][1].removesuffix(" [2]").split("…")
    assert len(head) > 20 and prose.startswith(head) and prose.strip().endswith(tail.strip())
    assert notes == [f"[1] {_flat(long_error)}", f"[2] {_flat(prose)}"]
    assert all(len(str(c)) <= CELL_CHARS for r in rows for c in r)


def test_run_stage_reasons_are_notes_too():
    from dlbench.harness.pipeline.report import stage_table

    reason = "tensorrt skipped: " + "TensorRT is not installed in this environment; " * 4
    text = stage_table({"bench": {"status": "ok", "seconds": 1.0, "reason": reason}})
    (rows, notes), *_ = _tables(text)
    assert max(len(c) for r in rows for c in r) <= CELL_CHARS
    assert _note(notes, dict(zip(*rows))["Reason"]) == _flat(reason)


# ---------------------------------------------------------------- charts


def _strictly_overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _inside(box, fig) -> bool:
    return box.x0 >= -1 and box.y0 >= -1 and box.x1 <= fig.bbox.x1 + 1 and box.y1 <= fig.bbox.y1 + 1


def test_legends_sit_off_the_data_and_inside_the_figure(crowded):
    assert len(crowded["drawn"]) >= 4
    for plot, fig in crowded["drawn"]:
        renderer = fig.canvas.get_renderer()
        (ax,) = fig.axes
        data, frame = ax.get_window_extent(renderer), ax.get_tightbbox(renderer)
        legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not _strictly_overlap(box, frame), f"{plot.title}: the legend covers the chart"
            assert _inside(box, fig), f"{plot.title}: the legend is cut off"
        assert _inside(ax.title.get_window_extent(renderer), fig), f"{plot.title}: title cut off"
        # the legend took its room from the figure, not from the data area
        assert data.height >= 2 * fig.dpi, plot.title
        assert fig.get_size_inches()[1] <= MAX_FIGURE_IN, plot.title


def test_tick_and_value_labels_never_overlap(crowded):
    for plot, fig in crowded["drawn"]:
        renderer = fig.canvas.get_renderer()
        (ax,) = fig.axes
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            shown = [t for at, t in zip(axis.get_ticklocs(), axis.get_ticklabels()) if lo <= at <= hi]
            boxes = [t.get_window_extent(renderer) for t in shown if t.get_text()]
            for i, a in enumerate(boxes):
                assert _inside(a, fig), f"{plot.title}: a tick label leaves the figure"
                for b in boxes[i + 1 :]:
                    assert not _strictly_overlap(a, b), f"{plot.title}: tick labels overlap"
        values = [t for t in ax.texts if t.get_visible()]
        boxes = [t.get_window_extent(renderer) for t in values]
        for i, a in enumerate(boxes):
            assert _inside(a, fig), f"{plot.title}: a value label leaves the figure"
            assert not any(_strictly_overlap(a, b) for b in boxes[i + 1 :]), plot.title
        if ax.patches:  # a bar chart: here every bar has room for its value
            assert len(values) == len(ax.patches), plot.title


def test_crowded_charts_are_split_by_model_and_lose_no_series(crowded):
    measured = {fields(r) for r in crowded["records"] if r["kind"] == "bench" and r["status"] != "failed"}
    assert len(measured) == ARTIFACTS
    by_title: dict[str, list] = {}
    for plot, fig in crowded["drawn"]:
        by_title.setdefault(plot.title.split(" (")[0], []).append(fig)
    bars = by_title["Backends at their best batch size"]
    assert len(bars) == math.ceil(ARTIFACTS / figures.BARS_PER_CHART) > 1
    assert sum(len(f.axes[0].patches) for f in bars) == ARTIFACTS
    assert all(len(f.axes[0].patches) <= figures.BARS_PER_CHART for f in bars)
    lines = by_title["Inference throughput vs batch size"]
    assert len(lines) == math.ceil(ARTIFACTS / figures.SERIES_PER_CHART)
    assert sum(len(f.axes[0].lines) for f in lines) == ARTIFACTS
    assert all(len(f.axes[0].lines) <= figures.SERIES_PER_CHART for f in lines)
    # the fields all series share are said once under the title, not on every label
    (ax,) = bars[0].axes
    assert "onnxruntime, cpu, fp32, batch 1" in ax.get_title()
    assert not any("onnxruntime" in t.get_text() for t in ax.get_yticklabels())


def test_long_names_are_cut_in_the_chart_and_given_in_full_in_its_key(crowded):
    page = (crowded["tmp"] / "report.html").read_text()
    cut = 0
    for plot, fig in crowded["drawn"]:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_yticklabels()] + [
            t.get_text() for legend in fig.legends for t in legend.get_texts()
        ]
        assert all(len(label) <= figures.LABEL_CHARS for label in labels), plot.title
        for name in LONG_NAMES:
            if any(label.startswith(name[:10]) for label in labels if "…" in label):
                assert f"= {name}" in plot.note, plot.title
                cut += 1
    assert cut >= 3  # in the line chart, the latency chart and the bars
    assert f"= {LONG_NAMES[0]}" in page
