"""The chain is defined once: ``dlbench run MODEL --print-steps`` prints the plan
``dlbench run`` executes, and every model script (generated from that plan, its
chain in scripts/lib/chain.sh) would run exactly those commands.

Parametrized over the registry's families: a new family needs a script (the
test says which), not new test code.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.harness.cli import build_parser
from dlbench.models.registry import get_model, list_models
from tests.utils import ROOT

SCRIPTS = ROOT / "scripts"
BIN = Path(sys.executable).parent
RUN_ID = "RUN-ID-OF-THE-TEST"
FAMILIES = sorted({get_model(m).family for m in list_models()})


def _script_of(family: str) -> tuple[Path, str]:
    """The script serving ``family`` and the model it defaults to."""
    for s in sorted(SCRIPTS.glob("*.sh")):
        text = s.read_text()
        served = re.search(r"^# dlbench-models:(.*)$", text, re.M)
        if served and any(
            get_model(m).family == family for m in served.group(1).split() if m in list_models()
        ):
            return s, re.search(r"^MODEL=\$\{MODEL:-([^}]*)\}", text, re.M).group(1)
    pytest.fail(
        f"model family {family!r} has no scripts/*.sh: generate one with "
        f"'dlbench run MODEL --print-steps script > scripts/{family}.sh'"
    )


def _env(**knobs: str) -> dict[str, str]:
    env = dict(
        os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", DLBENCH_RUN_ID=RUN_ID, DRY_RUN="1"
    )
    for k in ("DLBENCH", "MODEL", "WORKDIR", "FRAMEWORKS", "BACKENDS", "BATCH_SIZES"):
        env.pop(k, None)
    env.update(knobs)
    return env


def print_steps(model: str, *options: str) -> list[str]:
    out = subprocess.run(
        [str(BIN / "dlbench"), "run", model, "--print-steps", *options],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return [
        ln.replace('"$DLBENCH_RUN_ID"', RUN_ID) for ln in out.stdout.splitlines() if ln.startswith("dlbench ")
    ]


def dry_run(script: Path, cwd: Path, **knobs: str) -> list[str]:
    out = subprocess.run(
        ["bash", str(script)], cwd=cwd, env=_env(**knobs), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return [ln[len("    $ ") :] for ln in out.stdout.splitlines() if ln.startswith("    $ dlbench ")]


@pytest.mark.parametrize("family", FAMILIES)
def test_script_is_the_generated_one(family):
    script, model = _script_of(family)
    out = subprocess.run(
        [str(BIN / "dlbench"), "run", model, "--print-steps", "script"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert script.read_text() == out.stdout, (
        f"{script.name} differs from its generator: run 'dlbench run {model} --print-steps "
        f"script > scripts/{script.name}'"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_script_runs_the_steps_of_the_run(family, tmp_path):
    script, model = _script_of(family)
    assert dry_run(script, tmp_path) == print_steps(model)


def test_knobs_and_options_give_the_same_steps(tmp_path):
    """The same choices made as knobs and as run options: still the same commands.
    (A script's defaults are its default model's: another model's batch is a knob.)"""
    script, _ = _script_of("lstm")
    steps = dry_run(
        script,
        tmp_path,
        MODEL="lstm-tiny",
        FRAMEWORKS="pytorch,tensorflow",
        BATCH_SIZE=str(get_model("lstm-tiny").default_batch_size),
        BATCH_SIZES="1,2",
        BACKENDS="onnxruntime,tensorflow",
        TRAIN_STEPS="3",
        ITERATIONS="7",
        TIMEOUT="60",
        WORKDIR="w",
    )
    assert steps == print_steps(
        "lstm-tiny",
        "--frameworks",
        "pytorch,tensorflow",
        "--batch-sizes",
        "1,2",
        "--backends",
        "onnxruntime,tensorflow",
        "--train-steps",
        "3",
        "--iterations",
        "7",
        "--timeout",
        "60",
        "--workdir",
        "w",
    )
    # the pytorch checkpoint is left out: no chosen backend runs it
    bench = next(s for s in steps if s.startswith("dlbench bench "))
    assert "w/train/lstm-tiny/pytorch " not in bench + " "
    assert "w/train/lstm-tiny/tensorflow" in bench


def test_a_script_edited_apart_from_the_plan_is_caught(tmp_path):
    """A copy of a script with one default changed no longer matches the plan."""
    script, model = _script_of("resnet")
    shutil.copytree(SCRIPTS, tmp_path / "scripts")
    copy = tmp_path / "scripts" / script.name
    copy.write_text(
        copy.read_text().replace("TRAIN_STEPS=${TRAIN_STEPS:-6}", "TRAIN_STEPS=${TRAIN_STEPS:-7}")
    )
    assert dry_run(copy, tmp_path) != print_steps(model)
    # and a changed step in the shared chain too
    chain = tmp_path / "scripts" / "lib" / "chain.sh"
    chain.write_text(chain.read_text().replace('--to "$p"', '--to "$p" --per-tensor'))
    restored = tmp_path / "scripts" / script.name
    restored.write_text(script.read_text())
    assert dry_run(restored, tmp_path) != print_steps(model)


@pytest.mark.parametrize("model", [m for m in list_models()])
def test_every_printed_step_is_a_valid_command(model):
    parser = build_parser()
    for line in print_steps(model):
        argv = shlex.split(line)[1:]
        parser.parse_args(argv)  # exits 2 (SystemExit) on an unknown option


def test_print_steps_runs_nothing_and_uses_the_spec(tmp_path):
    wd = tmp_path / "work"
    steps = print_steps("lenet5", "--workdir", str(wd))
    assert not wd.exists()
    spec = get_model("lenet5")
    train = [s for s in steps if s.startswith("dlbench train ")]
    assert len(train) == len(spec.frameworks)
    assert all(
        f"--steps {spec.run.train_steps} " in s and f"--batch-size {spec.default_batch_size} " in s
        for s in train
    )
    assert "--calib-data digits" in next(s for s in steps if "--to int8" in s)
    assert steps[-1] == f"dlbench report --run {RUN_ID} --format md"


def test_print_steps_refuses_bad_input():
    out = subprocess.run(
        [str(BIN / "dlbench"), "run", "resnet50", "--print-steps", "--precisions", "fp8"],
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
