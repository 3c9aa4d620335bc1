"""The shell scripts in scripts/, run with bash exactly as a user runs them.

Core group: the scripts drive dlbench through its CLI in subprocesses, and
this process only reads the results database and the files they leave.
Each model script runs the whole chain (train -> export -> build -> bench) on
the smallest model it serves that the zoo has registered, at a tiny size;
the records it must have stored are counted from the same knobs it was given,
so a step the script skipped or a record it failed to produce shows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.harness.store.results import ResultStore
from dlbench.models.registry import get_model, list_models
from tests.utils import ROOT, tiny_onnx

SCRIPTS = ROOT / "scripts"
BIN = Path(sys.executable).parent  # the environment dlbench is installed in
ALL_SCRIPTS = sorted(SCRIPTS.glob("*.sh"))
MODEL_LINE = re.compile(r"^# dlbench-models:(.*)$", re.M)
# A knob: an environment variable with its default, NAME=${NAME:-default} (or ${1:-${NAME:-}}).
KNOB = re.compile(r"^(?:export )?([A-Z][A-Z0-9_]*)=\$\{(?:1:-\$\{)?([A-Z][A-Z0-9_]*):?-")
MODEL_KNOBS = {
    "MODEL",
    "FRAMEWORKS",
    "BATCH_SIZE",
    "TRAIN_STEPS",
    "WARMUP_STEPS",
    "BATCH_SIZES",
    "BACKENDS",
    "PRECISIONS",
    "WORKDIR",
    "DLBENCH",
    "DLBENCH_DB",
    "THREADS",
    "BUILD_FRAMEWORKS",
    "INT8_ARGS",
    "DRY_RUN",
}
OTHER_KNOBS = {
    "sweep.sh": {
        "MODEL_FILE",
        "BACKENDS",
        "BATCH_SIZES",
        "THREADS",
        "SCENARIOS",
        "WORKDIR",
        "DLBENCH",
        "DLBENCH_DB",
    },
    "convert.sh": {"CHECKPOINT", "ARCH", "FRAMEWORK", "PRECISIONS", "DLBENCH", "DLBENCH_DB"},
}
# Native checkpoints are measured on these backends where they are available
# (scripts/lib/common.sh `takers`).
NATIVE_TAKERS = {
    "pytorch": ("pytorch",),
    "tensorflow": ("tensorflow", "cpu-mkl"),
    "mindspore": ("mindspore", "ascend"),
}
TINY = {
    "TRAIN_STEPS": "2",
    "WARMUP_STEPS": "1",
    "BATCH_SIZE": "4",
    # One inference batch: a list is the same code in the script (tests/test_chain.py reads
    # the lists it prints), and each more batch size is six more bench processes.
    "BATCH_SIZES": "2",
    "WARMUP": "1",
    "MAX_WARMUP": "2",
    "ITERATIONS": "3",
    "TIMEOUT": "600",
    "TENSORRT": "off",
}


def served(script: Path) -> list[str]:
    found = MODEL_LINE.findall(script.read_text())
    return found[0].split() if found else []


MODEL_SCRIPTS = [s for s in ALL_SCRIPTS if served(s)]


def _registered_smallest(script: Path) -> str | None:
    names = [m for m in served(script) if m in list_models()]
    if not names:
        return None
    return min(names, key=lambda m: (get_model(m).parameter_count or 0, names.index(m)))


# Scripts with a registered model run; the others have nothing to run yet (and
# the coverage test below says which models lack a script).
RUNNABLE = [(s.name, m) for s in MODEL_SCRIPTS if (m := _registered_smallest(s))]


def _env(tmp: Path, **knobs: str) -> dict[str, str]:
    env = dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        DLBENCH_DB=str(tmp / "results.sqlite"),
        WORKDIR=str(tmp / "runs"),
    )
    for k in ("DLBENCH", "MODEL", "MODEL_FILE", "CHECKPOINT", "ARCH", "FRAMEWORK", "OUT"):
        env.pop(k, None)  # the scripts' own defaults, not the caller's
    env.update(knobs)
    return env


def _bash(script: str, tmp: Path, *args: str, timeout: float = 900, **knobs: str):
    return subprocess.run(
        ["bash", str(SCRIPTS / script), *args],
        cwd=tmp,
        env=_env(tmp, **knobs),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _log(out) -> str:
    return f"exit {out.returncode}\n--- stdout\n{out.stdout[-6000:]}\n--- stderr\n{out.stderr[-4000:]}"


@pytest.fixture(scope="module")
def available() -> set[str]:
    out = subprocess.run(
        [str(BIN / "dlbench"), "backends", "--json"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return {b["name"] for b in json.loads(out.stdout) if b["available"]}


# --- (1) every script is well-formed -------------------------------------------------


@pytest.mark.parametrize("script", ALL_SCRIPTS + [SCRIPTS / "lib" / "common.sh"], ids=lambda p: p.name)
def test_bash_parses(script):
    out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda p: p.name)
def test_strict_mode_header_and_knobs_on_top(script):
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert os.access(script, os.X_OK), f"{script.name} is not executable"
    top = 1
    while top < len(lines) and lines[top].startswith("#"):
        top += 1
    assert top >= 5, f"{script.name}: a header comment saying what it does and how to run it"
    assert "Run" in "\n".join(lines[:top]), f"{script.name}: the header says how to run it"
    assert lines[top] == "set -euo pipefail", f"{script.name}: line {top + 1} must be strict mode"
    # The knob block: right after strict mode, nothing but knobs and blank lines.
    i, knobs = top + 1, []
    while i < len(lines) and (not lines[i].strip() or KNOB.match(lines[i])):
        if lines[i].strip():
            m = KNOB.match(lines[i])
            assert m.group(1) == m.group(2), f"{script.name}: {lines[i]!r} defaults another name"
            knobs.append(m.group(1))
        i += 1
    later = [ln for ln in lines[i:] if KNOB.match(ln)]
    assert not later, f"{script.name}: knobs after the top block: {later}"
    required = OTHER_KNOBS.get(script.name, MODEL_KNOBS)
    assert required <= set(knobs), f"{script.name}: missing knobs {sorted(required - set(knobs))}"
    if script in MODEL_SCRIPTS:
        default = re.search(r"^MODEL=\$\{MODEL:-([^}]*)\}", script.read_text(), re.M).group(1)
        assert default in served(script), f"{script.name}: MODEL defaults to {default!r}"


# --- (2) every registered model has exactly one script --------------------------------


def test_every_registered_model_is_served_by_exactly_one_script():
    owners: dict[str, list[str]] = {}
    for s in MODEL_SCRIPTS:
        for m in served(s):
            owners.setdefault(m, []).append(s.name)
    assert {"resnet50.sh", "googlenet.sh", "lstm.sh", "bert.sh"} <= {s.name for s in MODEL_SCRIPTS}
    problems = {m: owners.get(m, []) for m in list_models() if len(owners.get(m, [])) != 1}
    assert not problems, (
        "each registered model needs exactly one scripts/*.sh with it on its "
        f"'# dlbench-models:' line; model -> scripts: {problems}"
    )


# --- (3) every model script runs the whole chain ---------------------------------------

_RUNS: dict[str, tuple] = {}


def _chain(script: str, model: str, tmp_path_factory):
    """Run a model script once per module (the convert test reuses resnet50.sh's run)."""
    if script not in _RUNS:
        spec = get_model(model)
        frameworks = (
            list(spec.frameworks)
            if script == "resnet50.sh"
            else ["pytorch" if "pytorch" in spec.frameworks else spec.frameworks[0]]
        )
        # resnet50.sh names its backends (cpu-mkl left out: the filter must drop it and the
        # checkpoints must still find theirs); the others take every available one.
        backends = "onnxruntime,pytorch,tensorflow,mindspore" if script == "resnet50.sh" else "all"
        knobs = dict(
            TINY,
            MODEL=model,
            FRAMEWORKS=",".join(frameworks),
            BACKENDS=backends,
            BUILD_FRAMEWORKS=frameworks[0],
            PRECISIONS="fp32,fp16,int8",
        )
        tmp = tmp_path_factory.mktemp(script.replace(".", "_"))
        out = _bash(script, tmp, timeout=1500, **knobs)
        _RUNS[script] = (out, tmp, knobs)
    return _RUNS[script]


# Every script is the run plan's own text (tests/test_chain.py compares each script, its
# dry run and `dlbench run --print-steps`), and `dlbench run` itself runs every stage in
# tests/harness/pipeline/test_run.py: running one script end to end shows the shell side works (each step
# printed, run, stored), without paying the whole chain once more per family.
END_TO_END = [(s, m) for s, m in RUNNABLE if s == "resnet50.sh"]


@pytest.mark.parametrize("script,model", END_TO_END, ids=[s for s, _ in END_TO_END])
def test_model_script_runs_the_chain(script, model, tmp_path_factory, available):
    out, tmp, knobs = _chain(script, model, tmp_path_factory)
    frameworks = knobs["FRAMEWORKS"].split(",")
    built = knobs["BUILD_FRAMEWORKS"]
    batches = {int(b) for b in knobs["BATCH_SIZES"].split(",")}
    for what in [f"train:{fw}" for fw in frameworks] + ["build:int8", "bench", "report"]:
        assert re.search(rf"^==> {what}$", out.stdout, re.M), _log(out)
    assert re.search(r"^    \$ dlbench train " + re.escape(model), out.stdout, re.M), _log(out)
    assert out.returncode in (0, 1), _log(out)

    store = ResultStore(tmp / "results.sqlite")
    recs = store.records("model = ?", (model,))
    by_kind = {k: [r for r in recs if r["kind"] == k] for k in ("train", "convert", "bench")}
    assert len(recs) == sum(map(len, by_kind.values())), [r["kind"] for r in recs]

    train = by_kind["train"]
    assert sorted(r["framework"] for r in train) == sorted(frameworks), _log(out)
    assert all(r["status"] == "ok" and r["iterations"] == 2 and r["batch_size"] == 4 for r in train), [
        (r["framework"], r["status"], r["error"]) for r in train
    ]

    hops = sorted(r["context"]["hop"] for r in by_kind["convert"])
    assert hops == sorted([f"{fw}->onnx" for fw in frameworks] + ["onnx->fp16", "onnx->int8"]), _log(out)
    for r in by_kind["convert"]:
        if r["context"]["hop"] == "onnx->int8":
            # An INT8 file of a barely trained net can miss the top-1 bound: the
            # script stores it as unverified, measures it anyway and exits 1.
            assert r["status"] in ("ok", "unverified"), (r["status"], r["error"])
            assert r["framework"] == built
        else:
            assert r["status"] == "ok", (r["context"]["hop"], r["status"], r["error"])
    not_ok = [r for r in by_kind["convert"] if r["status"] != "ok"]
    assert out.returncode == (1 if not_ok else 0), _log(out)
    assert ("step(s) exited 1" in out.stdout) == bool(not_ok), _log(out)
    out_dir = tmp / "runs" / "train" / model  # WORKDIR/train/MODEL/FRAMEWORK
    for fw in frameworks:
        assert (out_dir / fw / "model.onnx").is_file()

    bench = by_kind["bench"]
    assert all(r["status"] in ("ok", "unstable") for r in bench), [
        (r["backend"], r["status"], r["error"]) for r in bench if r["status"] not in ("ok", "unstable")
    ]
    assert all(r["iterations"] == 3 and r["scenario"] == "offline" for r in bench)
    onnx_cells = sorted(
        (Path(r["context"]["artifact"]["path"]).relative_to(out_dir).as_posix(), r["batch_size"])
        for r in bench
        if r["backend"] == "onnxruntime"
    )
    # as dlbench run: the built framework's fp32 ONNX and its builds
    files = [f"{built}/model.onnx", f"{built}/model.fp16.onnx", f"{built}/model.int8.onnx"]
    assert onnx_cells == sorted((f, b) for f in files for b in batches)
    native = sorted(
        (r["framework"], r["backend"], r["batch_size"]) for r in bench if r["backend"] != "onnxruntime"
    )
    wanted = available if knobs["BACKENDS"] == "all" else set(knobs["BACKENDS"].split(","))
    expected = sorted(
        (fw, b, n)
        for fw in frameworks
        for b in NATIVE_TAKERS[fw]
        if b in available and b in wanted
        for n in batches
    )
    assert native == expected
    assert str(tmp / "results.sqlite") in out.stdout
    # Every step's records form one run, and the script ends with that run's report.
    [run_id] = {r["run_id"] for r in recs}
    assert f"dlbench report --run {run_id} --format md" in out.stdout, _log(out)
    assert "## Training" in out.stdout and "## Inference" in out.stdout, _log(out)


# --- (4) sweep.sh and convert.sh -------------------------------------------------------


def test_sweep_over_an_onnx_file(tmp_path):
    model = tiny_onnx.save(tiny_onnx.classifier(), tmp_path / "tiny.onnx")
    out = _bash(
        "sweep.sh",
        tmp_path,
        model,
        BACKENDS="onnxruntime",
        BATCH_SIZES="1,2",
        THREADS="1,2",
        SCENARIOS="offline",
        WARMUP="1",
        MAX_WARMUP="2",
        ITERATIONS="4",
    )
    assert out.returncode == 0, _log(out)
    assert "$ dlbench bench " in out.stdout
    assert re.search(r"^\| .*Throughput", out.stdout, re.M), _log(out)  # bench's table
    recs = ResultStore(tmp_path / "results.sqlite").records("kind = 'bench'")
    cells = sorted((r["batch_size"], r["intra_op_threads"]) for r in recs)
    assert cells == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(
        r["status"] in ("ok", "unstable") and r["iterations"] == 4 and r["backend"] == "onnxruntime"
        for r in recs
    )
    written = list((tmp_path / "runs").glob("tiny.*.json"))
    assert len(written) == 1 and len(json.loads(written[0].read_text())) == 4


def test_sweep_and_convert_refuse_bad_input(tmp_path):
    for script, args in (
        ("sweep.sh", ()),
        ("sweep.sh", (str(tmp_path / "none.onnx"),)),
        ("convert.sh", ()),
        ("convert.sh", (str(tmp_path / "none.pt"),)),
    ):
        out = _bash(script, tmp_path, *args, timeout=120)
        assert out.returncode == 2, (script, args, _log(out))
        assert len(out.stderr.strip().splitlines()) == 1, (script, args, out.stderr)
    out = _bash("sweep.sh", tmp_path, str(tmp_path), timeout=120)  # a directory, not a file
    assert out.returncode == 2
    for script in (s.name for s in MODEL_SCRIPTS):
        for knobs in ({"BACKENDS": "onnxruntime,pytroch"}, {"PRECISIONS": "fp32,fp64"}):
            out = _bash(script, tmp_path, timeout=120, **knobs)
            assert out.returncode == 2, (script, knobs, _log(out))
            assert len(out.stderr.strip().splitlines()) == 1, (script, knobs, out.stderr)
            assert next(iter(knobs.values())).split(",")[1] in out.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything ran


def test_convert_a_bare_checkpoint(tmp_path, tmp_path_factory):
    model = "resnet50-mini"  # the checkpoint resnet50.sh's run trained
    assert ("resnet50.sh", model) in RUNNABLE
    _, run_dir, _ = _chain("resnet50.sh", model, tmp_path_factory)
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(run_dir / "runs" / "train" / model / "pytorch" / "model.pt", mine / "weights.pt")

    out = _bash("convert.sh", tmp_path, str(mine / "weights.pt"), timeout=120)
    assert out.returncode == 2, _log(out)  # a bare checkpoint needs its architecture
    assert "--model" in out.stderr

    out = _bash(
        "convert.sh",
        tmp_path,
        str(mine / "weights.pt"),
        ARCH=model,
        PRECISIONS="fp32,fp16",
        VERIFY_BATCH_SIZES="1,2",
        TENSORRT="off",
    )
    assert out.returncode == 0, _log(out)
    for n in (1, 2, 3, 4):
        assert f"==> [{n}/4]" in out.stdout
    assert (mine / "model.onnx").is_file() and (mine / "model.fp16.onnx").is_file()
    store = ResultStore(tmp_path / "results.sqlite")
    convert = store.records("kind = 'convert'")
    assert sorted(r["context"]["hop"] for r in convert) == ["onnx->fp16", "pytorch->onnx"]
    verify = store.records("kind = 'verify'")
    assert sorted(Path(r["context"]["candidate"]["path"]).name for r in verify) == [
        "model.fp16.onnx",
        "model.onnx",
    ]
    assert all(r["status"] == "ok" and r["model"] == model for r in convert + verify), [
        (r["kind"], r["status"], r["error"]) for r in convert + verify
    ]
    table = out.stdout.split("==> [4/4]")[1]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and "model." in ln]
    assert len(rows) == 2 and all(ln.rstrip(" |").endswith("ok") for ln in rows), table
