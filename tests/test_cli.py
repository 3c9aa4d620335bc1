"""The CLI as a user meets it: help, env, models, backends, and every bad input."""

import json
import subprocess
import sys

import pytest

from dlbench.harness.cli import COMMANDS
from tests.utils.clitools import assert_usage_error as _one_line_error

HEAVY = ("torch", "tensorflow", "mindspore", "tensorrt")
PROBE = """
import json, sys
from dlbench.harness.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps([m for m in {heavy!r} if m in sys.modules]))
"""


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["env"], ["env", "--json"], ["models"], ["backends"]] + [[c, "--help"] for c in COMMANDS],
)
def test_start_up_imports_no_framework(argv):
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_env_reports_machine_and_versions(cli):
    out = cli("env", "--json")
    assert out.returncode == 0
    fp = json.loads(out.stdout)
    assert fp["cpu"]["physical_cores"] >= 1 and fp["cpu"]["logical_cores"] >= 1
    assert fp["memory_gib"] > 0
    assert fp["python"].count(".") == 2
    for dist in ("torch", "tensorflow", "mindspore", "onnxruntime"):
        assert dist in fp["versions"]
    assert len(fp["machine_id"]) == 16
    text = cli("env").stdout
    assert "machine id" in text and fp["versions"]["mindspore"] in text


def test_models_lists_the_zoo_with_costs(cli):
    out = cli("models", "--json")
    zoo = {m["name"]: m for m in json.loads(out.stdout)}
    assert zoo["resnet50"]["parameters"] == 25_557_032
    assert zoo["resnet50"]["gflops_per_sample"] == pytest.approx(8.178, abs=1e-3)
    assert zoo["resnet50"]["inputs"][0]["shape"] == [3, 224, 224]
    assert set(zoo["resnet50"]["frameworks"]) == {"pytorch", "tensorflow", "mindspore"}
    assert "25,557,032" in cli("models").stdout


def test_backends_lists_every_named_backend_with_reasons(cli):
    rows = {r["name"]: r for r in json.loads(cli("backends", "--json").stdout)}
    assert set(rows) >= {"tensorrt", "onnxruntime", "ascend", "cpu-mkl", "pytorch", "tensorflow", "mindspore"}
    assert rows["onnxruntime"]["available"] and rows["cpu-mkl"]["available"]
    for name, row in rows.items():
        if not row["available"]:
            assert row["reason"], f"{name} unavailable without a reason"
    assert not rows["ascend"]["available"] and "Ascend" in rows["ascend"]["reason"]


@pytest.mark.parametrize(
    "args,needles",
    [
        (["train", "nosuchnet"], ["unknown model 'nosuchnet'", "resnet50"]),
        (["train", "resnet50-mini", "-f", "caffe"], ["unknown framework 'caffe'"]),
        (["train", "resnet50-mini", "--batch-size", "0"], ["--batch-size must be at least 1"]),
        (["train", "resnet50-mini", "--steps", "0"], ["--steps must be at least 1"]),
        (["train", "resnet50-mini", "--steps", "many"], ["'many' is not an integer"]),
        (["train", "resnet50-mini", "--device", "gpu"], ["--device gpu", "no NVIDIA GPU"]),
        (["train", "resnet50-mini", "--device", "ascend"], ["--device ascend", "no Ascend"]),
        (["train", "resnet50-mini", "--device", "tpu"], ["--device must be one of"]),
        (["train", "resnet50-mini", "--precision", "int4"], ["--precision must be one of"]),
        (["train", "resnet50-mini", "--data", "missing.npz"], ["--data missing.npz: no such file"]),
        (["train", "resnet50-mini", "--out", "afile/sub"], ["cannot write", "not a directory"]),
        (["train", "resnet50-mini", "--db", "afile/r.sqlite"], ["cannot write", "not a directory"]),
        (["train", "resnet50-mini", "--db", "afile"], ["not a dlbench results database"]),
        (["train", "resnet50-mini", "--json", "afile/x.json"], ["cannot write", "not a directory"]),
        (["train", "resnet50-mini", "--devices", "2", "--eager"], ["--eager", "steps run compiled"]),
        (["nosuchcommand"], ["invalid choice"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(cli, workdir, args, needles):
    (workdir / "afile").write_text("not a directory, not a database")
    before = sorted(p.name for p in workdir.iterdir())
    _one_line_error(cli(*args), *needles)
    assert sorted(p.name for p in workdir.iterdir()) == before


def test_debug_shows_the_traceback(cli, workdir):
    out = cli("--debug", "train", "nosuchnet")
    assert out.returncode == 2 and "Traceback" in out.stderr


HIDE = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == {name!r}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
"""


@pytest.mark.parametrize(
    "framework,module,extra", [("mindspore", "mindspore", "mindspore"), ("pytorch", "torch", "pytorch")]
)
def test_missing_framework_names_its_extra(cli, workdir, framework, module, extra):
    """A framework hidden from the import system is what an uninstalled one looks like."""
    site = workdir / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE.format(name=module))
    out = cli("train", "resnet50-mini", "-f", framework, env={"PYTHONPATH": str(site)})
    _one_line_error(out, "not installed", f"dlbench[{extra}]")
    assert not (workdir / "runs").exists()
