"""Every extension point is one declaration: a backend, an artifact format, a build target
and a data format declared from outside dlbench (this file, or a plugin module named by
DLBENCH_PLUGINS) appear everywhere dlbench lists, validates or dispatches them, with no
product file edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlbench.converters.base import BUILD_TARGETS
from dlbench.harness.backends import BACKENDS
from dlbench.harness.cli import main
from dlbench.harness.data.formats import DATA_FORMATS
from dlbench.harness.formats import FORMATS

# The plugin: a numpy "engine" that runs a .fake file (a JSON list of input shapes and a
# weight), a format that recognizes it, a build target that scales the weight, a data set.
PLUGIN = textwrap.dedent('''
    """A dlbench plugin, as a user would write one."""
    import json
    from pathlib import Path

    import numpy as np

    from dlbench.converters.base import BUILD_TARGETS, BuildHop
    from dlbench.harness.backends import BACKENDS
    from dlbench.harness.backends.base import (ArtifactRef, Backend, Option, Runner,
                                               TensorInfo, region)
    from dlbench.harness.data.formats import DATA_FORMATS, DataFormat
    from dlbench.harness.data.synthetic import Synthetic
    from dlbench.harness.formats import FORMATS, ArtifactFormat


    def load_fake(path, label, **_):
        from dlbench.harness.bench.artifacts import Artifact, sha256_of

        spec = json.loads(Path(path).read_text())
        sig = [TensorInfo("x", "float32", (None, *spec["shape"]))]
        ref = ArtifactRef(str(Path(path).resolve()), "fakefmt", Path(path).stem, None, None, spec)
        return Artifact(ref, label, sha256_of(Path(path)), sig, spec.get("precision", "fp32"))


    class FakeRunner(Runner):
        def load(self):
            self.weight = float(self.artifact.meta["weight"])

        def inputs(self):
            return [TensorInfo("x", "float32", (None, *self.artifact.meta["shape"]))]

        def prepare(self, feeds):
            return feeds["x"]

        def run(self, handle):
            self.out = handle * self.weight * (2.0 if self.cfg.options["turbo"] == "on" else 1.0)

        def outputs(self):
            return {"y": self.out}

        def timed_region(self):
            return region("one numpy multiply", host_device_copies=False)

        def runtime(self):
            return {"device_kind": "cpu", "turbo": self.cfg.options["turbo"]}


    class FakeBackend(Backend):
        formats = ("fakefmt",)
        options = (Option("turbo", "off", ("on", "off"), help="double the work's result"),)

        def missing(self):
            return None

        def version(self):
            return "1.0"

        def precisions(self, device):
            return ("auto", "fp32")

        def runner(self, artifact, cfg):
            return FakeRunner(artifact, cfg)


    class FakeHop(BuildHop):
        name = "onnx->fakebuild"
        targets = ("fakebuild",)
        suffix = ".fakebuild.onnx"
        options = ("calib_size",)
        summary = "the fake plugin's build"

        def build(self, source, out, options, **_):
            Path(out).write_bytes(Path(source).read_bytes())
            return {}


    BACKENDS.register("fakeengine", FakeBackend("fakeengine", "a numpy multiply (a plugin)",
                                                "numpy", "psutil", "fake"))
    FORMATS.register("fakefmt", ArtifactFormat("fakefmt", "a plugin's JSON model", (".fake",),
                                               "fakeengine", True, load_fake))
    BUILD_TARGETS.register("fakebuild", FakeHop())
    DATA_FORMATS.register("fakedata", DataFormat(
        "fakedata", "a plugin's data set", "dlbench.harness.data.synthetic:Synthetic",
        named=True))
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin imported in this process (and named for children); undeclared after."""
    (tmp_path / "fakeplugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DLBENCH_PLUGINS", "fakeplugin")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    )
    import importlib

    sys.modules.pop("fakeplugin", None)
    importlib.import_module("fakeplugin")
    yield tmp_path
    BACKENDS.unregister("fakeengine")
    FORMATS.unregister("fakefmt")
    BUILD_TARGETS.unregister("fakebuild")
    DATA_FORMATS.unregister("fakedata")
    sys.modules.pop("fakeplugin", None)


def _out(capsys, *argv: str) -> str:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code in (0, None), err
    return out


def test_a_declared_backend_is_listed_with_its_options(plugin, capsys):
    listed = _out(capsys, "backends")
    assert "fakeengine" in listed and "a numpy multiply (a plugin)" in listed
    options = _out(capsys, "backends", "--options")
    assert any(
        "fakeengine" in line and "turbo" in line and "double the work" in line
        for line in options.splitlines()
    )


def test_a_declared_backends_package_is_in_the_fingerprint(plugin, capsys):
    """Every record's fingerprint lists the versions that can change a number: a plugin
    backend's package (psutil here, listed by nothing else) is among them."""
    from dlbench.harness.machine.fingerprint import fingerprint

    fingerprint.cache_clear()  # read once per process: this one read it before the plugin
    assert any(line.split()[:1] == ["psutil"] for line in _out(capsys, "env").splitlines())


def test_a_declared_backend_option_is_a_bench_flag_and_a_config_key(plugin, capsys, tmp_path):
    assert "--turbo" in _out(capsys, "bench", "--help")
    model = tmp_path / "m.fake"
    model.write_text(json.dumps({"shape": [4], "weight": 3.0}))
    good = tmp_path / "good.toml"
    good.write_text('backend = ["fakeengine"]\nturbo = "on"\n')
    printed = _out(capsys, "bench", str(model), "--config", str(good), "--print-config")
    assert 'turbo = "on"' in printed
    bad = tmp_path / "bad.toml"
    bad.write_text('backend = ["fakeengine"]\nturbo = "sideways"\n')
    with pytest.raises(SystemExit) as exc:
        main(["bench", str(model), "--config", str(bad)])
    assert exc.value.code == 2
    assert "turbo" in capsys.readouterr().err


def test_a_declared_build_target_is_a_to_choice_with_its_options(plugin, capsys):
    text = _out(capsys, "build", "--help")
    assert "fakebuild" in text and "the fake plugin's build" in text
    # An option's help names every target that reads it, the plugin's among them.
    assert "tensorrt/int8/fakebuild: synthetic calibration samples" in " ".join(text.split())


def test_a_declared_data_format_is_listed_and_opened(plugin, capsys):
    from dlbench.harness.data import parse

    assert "fakedata" in " ".join(_out(capsys, "train", "--help").split())
    assert parse("fakedata") == ("fakedata", None)


def test_a_declared_format_is_resolved_and_picks_its_backend(plugin, tmp_path):
    from dlbench.harness.bench.artifacts import resolve
    from dlbench.harness.formats import default_backend, has_own_precision

    model = tmp_path / "m.fake"
    model.write_text(json.dumps({"shape": [4], "weight": 3.0}))
    art = resolve(str(model))
    assert art.format == "fakefmt" and art.signature[0].shape == (None, 4)
    assert default_backend("fakefmt") == "fakeengine" and has_own_precision("fakefmt")


def test_the_plugin_runs_in_a_cell_of_its_own_process(plugin, tmp_path):
    """The cell's child imports the plugin too (DLBENCH_PLUGINS is inherited): the fake
    backend measures the fake format end to end, its option in the record."""
    model = tmp_path / "m.fake"
    model.write_text(json.dumps({"shape": [4], "weight": 3.0}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlbench.harness",
            "bench",
            str(model),
            "-b",
            "fakeengine",
            "--turbo",
            "on",
            "--iterations",
            "20",
            "--warmup",
            "2",
            "--batch-sizes",
            "1,4",
            "--db",
            str(tmp_path / "r.db"),
            "--json",
            str(tmp_path / "r.json"),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    records = json.loads(Path(tmp_path / "r.json").read_text())
    assert [r["batch_size"] for r in records] == [1, 4]
    assert all(r["status"] in ("ok", "unstable") and r["backend"] == "fakeengine" for r in records)
    assert all(r["context"]["runtime"]["turbo"] == "on" for r in records)


def test_a_plugin_that_does_not_import_is_one_line(tmp_path):
    env = dict(os.environ, DLBENCH_PLUGINS="no_such_plugin_module")
    out = subprocess.run(
        [sys.executable, "-m", "dlbench.harness", "backends"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no_such_plugin_module" in lines[0]
