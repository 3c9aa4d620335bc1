"""``dlbench export`` with the real exporters: full ResNet-50 from each framework, verified.

Core group: every framework runs in a subprocess (tests/utils/make_checkpoint.py
and the CLI's export cells); this process only reads ONNX files and records.
The checkpoints are built and saved without training but with realistic
BatchNorm statistics (see make_checkpoint.py), so every layer shapes the
logits and a broken export cannot hide.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dlbench.converters import onnx_io, onnx_ir, onnx_summary
from dlbench.harness.store.results import ResultStore
from tests.utils import ROOT, tiny_onnx
from tests.utils.clitools import assert_usage_error as _one_line
from tests.utils.clitools import run_cli
from tests.utils.frameworks import FRAMEWORKS

MAKE_CHECKPOINT = ROOT / "tests" / "utils" / "make_checkpoint.py"


def _make(framework: str, model: str, out: Path, seed: int = 0) -> Path:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "utils" / "make_checkpoint.py"),
            framework,
            model,
            str(out),
            str(seed),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def resnet50(tmp_path_factory):
    d = tmp_path_factory.mktemp("resnet50")
    return {fw: _make(fw, "resnet50", d / fw) for fw in FRAMEWORKS}


@pytest.fixture(scope="module")
def minis(tmp_path_factory):
    d = tmp_path_factory.mktemp("minis")
    return {fw: _make(fw, "resnet50-mini", d / fw, seed=1) for fw in ("pytorch", "mindspore")}


@pytest.fixture(scope="module")
def exported(resnet50, tmp_path_factory):
    """One CLI call exports all three; the records and the database come back."""
    d = tmp_path_factory.mktemp("export")
    out = run_cli(
        "export",
        *(resnet50[fw] for fw in FRAMEWORKS),
        "--json",
        d / "export.json",
        env={"DLBENCH_DB": d / "results.sqlite"},
    )
    return out, json.loads((d / "export.json").read_text()), d / "results.sqlite"


def test_resnet50_from_every_framework_is_verified_at_batch_1_and_8(exported):
    out, records, _ = exported
    assert out.returncode == 0, out.stderr[-3000:]
    assert [r["framework"] for r in records] == list(FRAMEWORKS)
    for r in records:
        assert r["kind"] == "convert" and r["status"] == "ok", (r["framework"], r["error"])
        assert r["model"] == "resnet50" and r["precision"] == "fp32" and r["backend"] == "onnx"
        v = r["metrics"]["verdict"]
        assert v["ok"] and v["batch_sizes"] == [1, 8] and v["precision"] == "fp32"
        logits = v["outputs"]["logits"]
        assert logits["shape"] == [1000]
        assert logits["max_rel"] < 1e-3 and logits["cosine"] > 0.99999 and logits["top1"] == 1.0
        # The logits really depend on the input (a constant network would verify trivially).
        assert logits["ref_absmax"] > 0.5
        m = r["metrics"]
        assert m["convert_s"] > 0 and m["verify_s"] > 0 and m["file_size_bytes"] > 90e6
        assert m["node_count"] > 100 and r["duration_s"] > 0
        assert r["context"]["hop"] == f"{r['framework']}->onnx"
        assert r["framework_version"] and r["backend_version"]
    for fw in ("PyTorch", "pytorch->onnx", "tensorflow->onnx", "mindspore->onnx"):
        assert fw in out.stdout or fw.lower() in out.stdout
    assert out.stdout.count("| logits |") == 3 and out.stdout.count("| ok ") == 3


def test_every_exported_file_looks_the_same(exported, resnet50):
    _, records, _ = exported
    limit = onnx_ir.ort_max_ir_version()
    for r in records:
        path = Path(r["context"]["artifact"]["path"])
        assert path == (resnet50[r["framework"]] / "model.onnx").resolve()
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
        assert model.ir_version <= limit
        s = onnx_summary.summarize(model)
        assert [(t.name, t.dtype, t.shape) for t in s.inputs] == [
            ("input", "float32", ("batch", 3, 224, 224))
        ]
        assert [(t.name, t.shape) for t in s.outputs] == [("logits", ("batch", 1000))]
        assert s.metadata["model"] == "resnet50" and s.metadata["framework"] == r["framework"]
        assert s.metadata["source_sha256"] == r["context"]["source"]["sha256"]
        assert s.op_counts["Conv"] == 53
        onnx_io.session(path)
    keras = next(r for r in records if r["framework"] == "tensorflow")
    # The NCHW wrapper's transpose is folded into the first convolution by tf2onnx.
    assert "Transpose" not in keras["metrics"]["op_counts"]
    assert keras["context"]["export"]["transposes_left"] == 0
    ms = next(r for r in records if r["framework"] == "mindspore")
    assert ms["context"]["export"]["rewrites"] == [
        "stem.pool: MaxPool2d(pad_mode='pad') -> Pad(0) + MaxPool2d(valid)"
    ]


def test_records_and_artifacts_are_stored(exported):
    _, records, db = exported
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM records WHERE kind = 'convert' ORDER BY id").fetchall()
    assert [r["status"] for r in rows] == ["ok"] * 3 and len({r["run_id"] for r in rows}) == 1
    store = ResultStore(db)
    for r in records:
        art = store.artifact(r["context"]["artifact"]["sha256"])
        assert art["verified"] is True and art["record_id"] == r["id"]
        assert art["format"] == "onnx" and art["precision"] == "fp32" and art["model"] == "resnet50"
        assert art["source_sha256"] == r["context"]["source"]["sha256"]
        assert art["sha256"] == onnx_io.sha256(art["path"])


def test_mindir_export_is_verified_in_mindspore(cli, workdir, minis):
    out = cli("export", str(minis["mindspore"]), "--format", "mindir", "--json", "m.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "m.json").read_text())
    assert r["status"] == "ok" and r["backend"] == "mindir" and r["context"]["hop"] == "mindspore->mindir"
    assert r["metrics"]["verdict"]["batch_sizes"] == [1, 8]
    path = Path(r["context"]["artifact"]["path"])
    assert path.suffix == ".mindir" and path.stat().st_size > 100_000
    assert oct(path.stat().st_mode & 0o777) != "0o400"  # MindSpore writes 0400; we publish
    out = cli("verify", str(minis["mindspore"]), str(path), "--json", "v.json")
    assert out.returncode == 0, out.stderr[-3000:]
    # The checkpoint's reference runs eagerly (Backend.verify_options); a MindIR, a compiled
    # graph, in GRAPH_MODE, the only way it runs: --eager on one is refused.
    [v] = json.loads((workdir / "v.json").read_text())
    modes = [v["context"][side]["runtime"]["mode"] for side in ("reference_run", "candidate_run")]
    assert modes == ["PYNATIVE_MODE", "GRAPH_MODE"], modes
    _one_line(cli("bench", str(path), "-b", "mindspore", "--eager"), "a MindIR file is a compiled graph")


def test_mindir_is_for_mindspore_checkpoints_only(cli, workdir, minis):
    out = cli("export", str(minis["pytorch"]), "--format", "mindir")
    assert out.returncode == 2 and "only MindSpore checkpoints export MindIR" in out.stderr


def test_static_batch_export(cli, workdir, minis):
    out = cli(
        "export",
        str(minis["pytorch"]),
        "--static-batch",
        "--batch-size",
        "2",
        "--out",
        "static.onnx",
        "--json",
        "s.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "s.json").read_text())
    assert r["status"] == "ok" and r["batch_size"] == 2
    assert r["metrics"]["verdict"]["batch_sizes"] == [2]
    s = onnx_summary.summarize(onnx.load(workdir / "static.onnx"))
    assert s.inputs[0].shape == (2, 3, 64, 64) and s.outputs[0].shape == (2, 10)


def test_a_broken_export_is_caught_by_verify(cli, workdir, minis):
    """Weights changed after export: the file no longer computes what the checkpoint does."""
    ck = minis["pytorch"]
    out = cli("export", str(ck), "--out", "good.onnx")
    assert out.returncode == 0, out.stderr[-3000:]
    model = onnx.load(workdir / "good.onnx")
    conv = next(t.name for t in model.graph.initializer if len(t.dims) == 4)
    tiny_onnx.save(tiny_onnx.scale_initializer(model, conv, 1.02), workdir / "broken.onnx")
    good = cli("verify", str(ck), "good.onnx")
    assert good.returncode == 0, good.stderr[-3000:]
    bad = cli("verify", str(ck), "broken.onnx", "--json", "v.json")
    assert bad.returncode == 1
    assert "output logits over fp32 tolerance: max abs diff" in bad.stderr
    assert "UNVERIFIED" in bad.stdout
    [r] = json.loads((workdir / "v.json").read_text())
    assert r["status"] == "unverified" and r["context"]["reference"]["kind"] == "checkpoint"
    worst = r["metrics"]["verdict"]["outputs"]["logits"]["worst"]
    assert worst["batch_size"] in (1, 8) and worst["reference"] != worst["candidate"]
    art = ResultStore(workdir / "results.sqlite").artifact(onnx_io.sha256(workdir / "broken.onnx"))
    assert art["verified"] is False and art["source_sha256"] == onnx_io.sha256(ck / "model.pt")


def test_bad_checkpoints_are_one_line_and_exit_2(cli, workdir, minis):
    ck = minis["pytorch"]
    _one_line(
        cli("export", str(ck / "model.pt"), "--model", "resnet50"), "does not match resnet50 in PyTorch"
    )
    _one_line(
        cli("export", str(minis["mindspore"] / "model.ckpt"), "--model", "resnet50"),
        "does not match resnet50 in MindSpore",
    )
    _one_line(cli("export", str(ck / "model.pt")), "torch.save pickle", "--model ZOO_NAME")
    _one_line(cli("export", "missing/manifest.json"), "no such file")
    # A zoo name is no checkpoint: the line says which command makes one ("already zoo" did not).
    _one_line(cli("export", "resnet50-mini"), "a zoo name", "dlbench train resnet50-mini --out DIR")
    (workdir / "notes.txt").write_text("hello")
    _one_line(cli("export", "notes.txt", "--model", "resnet50-mini"), "cannot tell the framework from '.txt'")
    (workdir / "manifest.json").write_text("{not json")
    _one_line(cli("export", "manifest.json"), "not a dlbench checkpoint manifest")
    _one_line(cli("export", str(ck), "--opset", "99"), "--opset 99")
    _one_line(cli("export", str(ck), str(ck), "--out", "x.onnx"), "--out names one file")
    from dlbench.harness.machine.frameworks import is_installed

    if not is_installed("onnxscript"):
        _one_line(cli("export", str(ck), "--exporter", "dynamo"), "needs onnxscript")
    assert not list(ck.glob(".*partial"))


def test_model_given_overrides_a_manifests(tmp_path):
    """`export RUN_DIR --model gnmt-mini-greedy` exports the greedy decoder, not the
    teacher-forced network the manifest says trained (it was silently ignored)."""
    from dlbench.models.native import checkpoint_manifest

    (tmp_path / "model.pt").write_bytes(b"")
    (tmp_path / "manifest.json").write_text(
        json.dumps({"model": "gnmt-mini", "framework": "pytorch", "checkpoint": "model.pt"})
    )
    _, as_trained = checkpoint_manifest(tmp_path)
    assert as_trained["model"] == "gnmt-mini" and "trained_as" not in as_trained
    _, asked = checkpoint_manifest(tmp_path, None, "gnmt-mini-greedy")
    assert asked["model"] == "gnmt-mini-greedy" and asked["trained_as"] == "gnmt-mini"
