"""Progress on stderr: plain lines with an ETA off a terminal, a rich display on one,
nothing with --quiet; one display for a whole ``dlbench run``."""

from __future__ import annotations

import io
import re

from rich.console import Console

from dlbench.harness.output.progress import Progress, clock, open_progress
from tests.utils import benchmodels

LINE = re.compile(r"^\[(\d+)/(\d+)\] (.+): (.+) \(elapsed \w+, ETA (\w+|unknown)\)$")
FAST = ("--min-duration", "0.1", "--min-iterations", "3", "--warmup", "1", "--max-warmup", "2")


def test_plain_lines_one_per_finished_unit_with_elapsed_and_eta():
    out = io.StringIO()
    bar = Progress(3, stream=out, kind="bench")
    for i in range(3):
        bar.start(f"cell {i}")
        bar.update({"phase": "measuring", "iterations": 5})  # a terminal's business only
        bar.finish("ok 812 img/s")
    lines = out.getvalue().splitlines()
    assert [LINE.match(x).group(1, 2, 3) for x in lines] == [
        ("1", "3", "cell 0"),
        ("2", "3", "cell 1"),
        ("3", "3", "cell 2"),
    ]
    assert lines[-1].endswith("ETA 0s)")


def test_eta_is_the_mean_per_kind_times_what_is_left():
    bar = Progress(enabled=False)
    bar.expect(2, "train")
    bar.expect(4, "bench")
    assert bar.eta() == "ETA unknown"
    bar.finished = {"train": [60.0]}
    # one train left at 60 s; four bench cells borrow the overall mean (60 s) until one ends
    assert bar.eta_s() == 60 + 4 * 60
    bar.finished = {"train": [60.0, 100.0], "bench": [10.0]}
    assert bar.eta_s() == 3 * 10 and bar.eta() == "ETA 30s"
    assert clock(3725) == "1h02m05s" and clock(72) == "1m12s"


def test_quiet_prints_nothing():
    out = io.StringIO()
    bar = Progress(2, stream=out, enabled=False)
    bar.note("note")
    bar.start("a")
    bar.finish("ok")
    assert out.getvalue() == ""


def test_the_rich_display_renders_on_a_terminal():
    file = io.StringIO()
    console = Console(force_terminal=True, file=file, width=160)
    bar = Progress(2, console=console, kind="bench")
    bar.start("resnet50 on onnxruntime")
    bar.update({"phase": "warm-up", "iterations": 3, "throughput_sps": 42.0})
    bar._rich.refresh()
    drawn = file.getvalue()
    assert "\x1b[" in drawn and "ETA unknown" in drawn and "warm-up, 3 it, 42 samples/s" in drawn
    bar.finish("ok")
    bar.start("second")
    bar.finish("ok")
    assert bar._rich is None  # closed after its last unit
    assert re.search(r"\[1/2\] resnet50 on onnxruntime: ok \(elapsed \w+, ETA \w+\)", file.getvalue())


def test_a_run_is_one_display_its_bench_adds_its_cells():
    out = io.StringIO()
    with Progress(stream=out) as run:
        run.expect(1, "train")
        run.expect(1, "bench")  # a guess until the sweep knows its cells
        run.start("train:pytorch", "train")
        run.finish("ok")
        sweep = open_progress(3, "bench")
        assert sweep is run and run.total == 4
        for i in range(3):
            sweep.start(f"cell {i}")
            sweep.finish("ok")
    assert open_progress(1, "bench", enabled=False) is not run
    assert [LINE.match(x).group(2) for x in out.getvalue().splitlines()] == ["2", "4", "4", "4"]


def test_bench_cli_off_a_terminal_prints_lines_with_eta_and_quiet_prints_none(cli, workdir):
    mlp = benchmodels.mlp(workdir / "mlp.onnx")
    out = cli("bench", str(mlp), "-b", "onnxruntime", "--batch-sizes", "1,2", *FAST)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [x for x in out.stderr.splitlines() if x.startswith("[")]
    assert len(lines) == 2 and all(LINE.match(x) for x in lines), out.stderr
    assert "ETA" not in out.stdout
    for flag in ("--quiet", "--no-progress", "-q"):
        quiet = cli("bench", str(mlp), "-b", "onnxruntime", *FAST, flag)
        assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
