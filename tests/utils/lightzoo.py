"""The onnx package's "light" model zoo through every command, with default flags.

Nine Caffe-era classifiers ship inside the onnx wheel (``onnx/backend/test/data/light``,
so no download): opset 9, batch fixed at 1, every initializer also a graph input
(IR 3), and every weight computed by a ``ConstantOfShape`` node.  Each model goes
through what a new user types first — bench, build --to int8, build --to fp16,
verify, eval — and each command either gives verdict ok or one clear line that
names why the model is unsupported.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx

from tests.utils.clitools import assert_usage_error, only_record

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
CLASSES = 1000
QUICK_BENCH = ("--iterations", "5", "--warmup", "1", "--max-warmup", "2")


def source(workdir: Path, name: str) -> Path:
    """A copy of light model ``name`` (builds write next to their source, never into the
    installed package)."""
    path = workdir / f"light_{name}.onnx"
    shutil.copy(LIGHT / path.name, path)
    return path


def heldout_npz(path: Path, n: int = 3) -> Path:
    """A small .npz data set in the models' own terms: 224×224 RGB images labelled with
    ImageNet's 1000 classes, with a held-out split."""
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (n, 3, 224, 224)).astype(np.float32)
    np.savez(path, x=x, y=rng.integers(0, CLASSES, n), x_test=x, y_test=rng.integers(0, CLASSES, n))
    return path


def _ok(out, what: str) -> None:
    assert out.returncode == 0, f"{what}: rc {out.returncode}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stderr, out.stderr


def run_through(cli, workdir: Path, name: str) -> dict:
    """Every command on light model ``name``; the records by command."""
    src = source(workdir, name)
    recs = {}
    # What is tested is that each command takes the model, not its figures: a short bench
    # and a small calibration set (these are full-size 224x224 networks; the defaults'
    # 64 calibration images cost ResNet-50 most of its test).
    out = cli("bench", str(src), "-b", "onnxruntime", *QUICK_BENCH, "--json", "bench.json")
    _ok(out, "bench")
    [bench] = json.loads((workdir / "bench.json").read_text())
    # A loaded machine may flag the run noisy: measured all the same, never failed.
    assert bench["status"] in ("ok", "unstable") and bench["batch_size"] == 1
    recs["bench"] = bench

    for to in ("int8", "fp16"):
        calib = ["--calib-size", "4"] if to == "int8" else []
        out = cli("build", str(src), "--to", to, *calib, "--json", f"{to}.json")
        _ok(out, f"build --to {to}")
        rec = recs[to] = only_record(workdir, f"{to}.json")
        assert rec["status"] == "ok" and rec["metrics"]["verdict"]["ok"], rec["error"]
        assert rec["metrics"]["verdict"]["batch_sizes"] == [1]
        normalized = rec["context"]["normalize"]
        assert normalized["verdict"]["ok"] and normalized["frozen_initializer_inputs"] > 0
        assert normalized["folded_nodes"] > 0
        # The quantizer's per-channel Q/DQ needs opset 13; float16 conversion reads 9.
        assert normalized.get("opset_upgraded") == ([9, 13] if to == "int8" else None)
        assert "fixed at 1: verified at batch 1 only" in out.stderr
        assert "normalized the graph: froze" in out.stderr
    int8 = onnx.load(str(workdir / f"light_{name}.int8.onnx"), load_external_data=False)
    ops = {n.op_type for n in int8.graph.node}
    assert "QuantizeLinear" in ops and "ConstantOfShape" not in ops
    assert not {i.name for i in int8.graph.input} & {t.name for t in int8.graph.initializer}
    assert recs["int8"]["context"]["build_info"]["calibration"]["batch"] == 1

    out = cli("verify", str(src), str(workdir / f"light_{name}.fp16.onnx"), "--json", "verify.json")
    _ok(out, "verify")
    recs["verify"] = only_record(workdir, "verify.json")
    assert recs["verify"]["metrics"]["verdict"]["ok"]
    assert recs["verify"]["metrics"]["verdict"]["batch_sizes"] == [1]

    # Default --data digits: ten classes are not the model's thousand.
    out = cli("eval", str(src))
    assert_usage_error(out, "--data digits: 10 classes", f"scores {CLASSES}")
    data = heldout_npz(workdir / "heldout.npz")
    out = cli("eval", str(workdir / f"light_{name}.int8.onnx"), "--data", str(data), "--json", "eval.json")
    _ok(out, "eval")
    recs["eval"] = only_record(workdir, "eval.json")
    assert recs["eval"]["status"] == "ok" and recs["eval"]["batch_size"] == 1
    assert recs["eval"]["metrics"]["eval"]["samples"] == 3
    assert "fixed at 1: scored at batch 1 only (asked for 64)" in out.stderr
    return recs
