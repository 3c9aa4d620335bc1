"""``dlbench run``: every stage on a small model, killed in the middle of its
benchmark sweep and resumed, with no record lost and none duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import psutil
import pytest

from dlbench.harness.store.results import ResultStore
from tests.utils.clitools import assert_usage_error

MODEL = "resnet50-mini"
BATCHES = (1, 2, 4)
RUN = [
    "run",
    MODEL,
    "--frameworks",
    "pytorch",
    "--train-steps",
    "2",
    "--warmup-steps",
    "1",
    "--train-batch-size",
    "4",
    "--batch-sizes",
    ",".join(map(str, BATCHES)),
    "--iterations",
    "30",
    "--warmup",
    "1",
    "--max-warmup",
    "2",
    "--timeout",
    "300",
]
# On a CPU machine with ONNX Runtime and OpenVINO (both in the cpu extra CI installs): the
# fp32 export and its INT8 and FP16 builds on each, the PyTorch checkpoint on pytorch.
EXPECTED_CELLS = {
    (backend, precision, b)
    for b in BATCHES
    for backend in ("onnxruntime", "openvino")
    for precision in ("fp32", "int8", "fp16")
} | {("pytorch", "fp32", b) for b in BATCHES}


def dlbench(args, env, **kw):
    return subprocess.run(
        [sys.executable, "-m", "dlbench.harness", *args], env=env, text=True, capture_output=True, **kw
    )


@pytest.fixture(scope="module")
def interrupted_then_resumed(tmp_path_factory):
    """Start a run, kill it (SIGKILL, children too) once its sweep has stored two
    cells, resume it; return what each part left behind."""
    tmp = tmp_path_factory.mktemp("run")
    env = dict(os.environ, DLBENCH_DB=str(tmp / "db.sqlite"))
    env.pop("DLBENCH_RUN_ID", None)
    workdir = tmp / "work"
    args = RUN + ["--workdir", str(workdir)]
    store = ResultStore(tmp / "db.sqlite")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlbench.harness", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    bench_before = []
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            bench_before = store.records("kind = 'bench'")
            if len(bench_before) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted:\n" + proc.stdout.read()
        family = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(1.0)
    survivors = [
        pid
        for pid in family
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    bench_at_kill = store.records("kind = 'bench'")
    resumed = dlbench(args + ["--resume"], env, timeout=900)
    return {
        "store": store,
        "workdir": workdir,
        "env": env,
        "args": args,
        "bench_at_kill": bench_at_kill,
        "resumed": resumed,
        "survivors": survivors,
    }


def test_kill_leaves_no_cell_running(interrupted_then_resumed):
    """A cell runs in its own session; it must still die with its parent."""
    assert interrupted_then_resumed["survivors"] == []


def test_resume_finishes_the_sweep_without_duplicates_or_losses(interrupted_then_resumed):
    r = interrupted_then_resumed
    assert r["resumed"].returncode == 0, r["resumed"].stderr[-3000:]
    at_kill = r["bench_at_kill"]
    assert 2 <= len(at_kill) < len(EXPECTED_CELLS), "the kill did not land mid-sweep"
    records = r["store"].records()
    assert len({x["run_id"] for x in records}) == 1, "a resumed run keeps its run id"
    bench = [x for x in records if x["kind"] == "bench"]
    assert all(x["status"] != "failed" for x in bench), [x["error"] for x in bench]
    keys = Counter(x["cell_key"] for x in bench)
    assert max(keys.values()) == 1, "a cell was measured twice"
    assert {(x["backend"], x["precision"], x["batch_size"]) for x in bench} == EXPECTED_CELLS
    # The records stored before the kill are kept as they were, not measured again.
    assert {x["id"] for x in at_kill} <= {x["id"] for x in bench}
    kinds = Counter((x["kind"], (x["context"].get("hop") or "")) for x in records if x["kind"] != "bench")
    assert kinds == {
        ("train", ""): 1,
        ("convert", "pytorch->onnx"): 1,
        ("convert", "onnx->int8"): 1,
        ("convert", "onnx->fp16"): 1,
    }


def test_resume_reports_finished_stages_and_prints_every_table(interrupted_then_resumed):
    r = interrupted_then_resumed
    err, out = r["resumed"].stderr, r["resumed"].stdout
    for stage in ("train:pytorch", "export:pytorch", "build:int8", "build:fp16"):
        assert f"{stage}: " in err and "finished earlier, not redone" in err
    for title in ("## Stages", "## Training", "## Conversion", "## Inference"):
        assert title in out
    assert (r["workdir"] / "report.md").read_text() in out
    assert (r["workdir"] / "report.html").read_text().count('src="data:image/svg+xml;base64,') >= 2
    stages = {p.stem: json.loads(p.read_text()) for p in (r["workdir"] / "stages").glob("*.json")}
    assert stages["bench"]["artifacts"]["cells"] == len(EXPECTED_CELLS)
    assert stages["train-pytorch"]["status"] == "ok"
    # No GPU in CI: TensorRT stages are reported unavailable with the reason, not failed.
    trt = [s for name, s in stages.items() if name.startswith("build-tensorrt")]
    assert trt and all(s["status"] == "unavailable" and s["reason"] for s in trt)


def test_a_second_resume_redoes_nothing(interrupted_then_resumed):
    r = interrupted_then_resumed
    before = len(r["store"].records())
    again = dlbench(r["args"] + ["--resume", "--no-progress"], r["env"], timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(r["store"].records()) == before


def test_bad_input(tmp_path, interrupted_then_resumed):
    r = interrupted_then_resumed
    env = dict(r["env"], DLBENCH_DB=str(tmp_path / "db.sqlite"))
    used = ["--workdir", str(r["workdir"])]
    cases = [
        (["run", "no-such-model"], "unknown model"),
        (["run", MODEL, "--frameworks", "caffe"], "unknown framework"),
        (["run", MODEL, "--backends", "nope"], "unknown backend"),
        (["run", MODEL, "--precisions", "int4"], "--precisions int4"),
        (["run", MODEL, "--train-steps", "0"], "--steps must be at least 1"),
        (["run", MODEL, "--device", "gpu", "--frameworks", "pytorch"], "gpu"),
        (["run", "bert", "--size", "resnet50-mini"], "--size"),
        (RUN + used, "pass --resume"),
        (["run", "resnet50", "--resume"] + used, "resnet50"),
        (["run", MODEL, "--workdir", "/proc/dlbench"], "/proc/dlbench"),
    ]
    for args, needle in cases:
        assert_usage_error(dlbench(args, env), needle)


def test_lstm_tiny_runs_every_stage_in_every_framework(tmp_path):
    """A token model through the whole chain: trained with the model's own learning
    rate (the loss falls), exported from all three frameworks, quantized
    dynamically, and benchmarked at the sequence length the zoo gives."""
    from dlbench.models.registry import get_model

    spec = get_model("lstm-tiny")
    frameworks = ("pytorch", "tensorflow", "mindspore")
    env = dict(os.environ, DLBENCH_DB=str(tmp_path / "db.sqlite"))
    env.pop("DLBENCH_RUN_ID", None)
    done = dlbench(
        [
            "run",
            "lstm-tiny",
            "--frameworks",
            ",".join(frameworks),
            "--train-steps",
            "2",
            "--warmup-steps",
            "1",
            "--train-batch-size",
            "4",
            "--eager",  # the stages' chain is tested here; the compiled steps in training's
            "--batch-sizes",
            "2",  # one: each more is six bench processes, three of them a framework's
            "--iterations",
            "5",
            "--warmup",
            "1",
            "--max-warmup",
            "2",
            "--no-progress",
            "--timeout",
            "300",
            "--workdir",
            str(tmp_path / "work"),
        ],
        env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stages = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "work" / "stages").glob("*.json")}
    assert {f"{kind}-{fw}" for kind in ("train", "export") for fw in frameworks} <= set(stages)
    assert {"build-int8", "build-fp16", "bench"} <= set(stages)
    for name, s in stages.items():
        assert s["status"] in ("ok", "unverified", "unavailable"), (name, s)
        if s["status"] == "unavailable":
            assert s["reason"], name

    store = ResultStore(tmp_path / "db.sqlite")
    train = {r["framework"]: r for r in store.records("kind = 'train'")}
    assert sorted(train) == sorted(frameworks)
    for fw, r in train.items():
        assert r["status"] == "ok", r["error"]
        assert r["context"]["config"]["learning_rate"] == spec.default_lr != 0.05
        assert r["context"]["config"]["eager"] is True  # the stage passed run's --eager on
        m = r["metrics"]
        assert m["loss_end"] < m["loss_start"], (fw, m["losses"])
    exports = [r for r in store.records("kind = 'convert'") if r["context"]["hop"].endswith("->onnx")]
    assert sorted(r["framework"] for r in exports) == sorted(frameworks)
    (int8,) = [r for r in store.records("kind = 'convert'") if r["context"]["hop"] == "onnx->int8"]
    assert int8["context"]["options"]["dynamic"] is True

    bench = store.records("kind = 'bench'")
    assert {r["backend"] for r in bench} >= {"onnxruntime", *frameworks}
    for r in bench:
        assert r["status"] != "failed", (r["backend"], r["error"])
    onnx_cells = [r for r in bench if r["backend"] == "onnxruntime"]
    assert {r["precision"] for r in onnx_cells} == {"fp32", "fp16", "int8"}
    for r in onnx_cells:  # the graph count sees the LSTMs, quantized ones included
        assert r["metrics"]["flops"]["macs_per_sample"] == spec.macs_per_sample


def test_a_second_writer_of_a_workdir_is_refused_naming_the_first(workdir):
    from dlbench.core.atomic import sole_writer
    from dlbench.harness.pipeline.resume import LOCK

    env = dict(os.environ, DLBENCH_DB=str(workdir / "db.sqlite"))
    with sole_writer(workdir / "w" / LOCK, "held by this test"):
        out = dlbench(RUN + ["--workdir", str(workdir / "w"), "--resume"], env, timeout=300)
    assert_usage_error(out, f"is being written by dlbench PID {os.getpid()} ")


def test_resume_retries_a_failed_stage_unless_told_not_to(tmp_path):
    """A failure (a full disk, an OOM, a kill) need not be permanent: --resume runs the
    stage again by default; --no-retry keeps today's 'finished earlier'."""
    from types import SimpleNamespace

    from dlbench.harness.pipeline.resume import finished
    from dlbench.harness.pipeline.workdir import Workdir

    wd = Workdir(tmp_path / "w")
    wd.start({"run_id": "r"})
    stage = SimpleNamespace(kind="export", name="export-pytorch", matches=lambda r: False)
    wd.finish(stage.name, {"status": "failed", "reason": "No space left on device"})
    assert finished(stage, wd, [], retry=True) is None
    assert finished(stage, wd, [], retry=False)["status"] == "failed"
    wd.finish(stage.name, {"status": "ok"})
    assert finished(stage, wd, [], retry=True)["status"] == "ok"
