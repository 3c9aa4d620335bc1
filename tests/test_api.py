"""``import dlbench``: the version and the public API the CLI is a layer over."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

import dlbench
from tests.utils import ROOT, tiny_onnx


def test_version_is_the_installed_distributions():
    assert dlbench.__version__ == version("dlbench")


def test_import_dlbench_imports_no_framework():
    code = (
        "import sys, dlbench; print(','.join(m for m in ('torch', 'tensorflow', 'mindspore', "
        "'onnxruntime', 'onnx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_bench_runs_cells_and_returns_their_records(tmp_path):
    path = tiny_onnx.save(tiny_onnx.classifier(), tmp_path / "tiny.onnx")
    records = dlbench.bench(
        [path], ["onnxruntime"], batch_sizes=[1, 2], threads=[1], db=str(tmp_path / "r.db")
    )
    assert [r["batch_size"] for r in records] == [1, 2]
    assert all(r["status"] in ("ok", "unstable") for r in records), records
    assert all(r["throughput_sps"] > 0 for r in records)


def test_a_refused_cell_leaves_the_others_measured_as_in_the_cli(tmp_path):
    """The API's sweep goes on past a refused cell, as 'dlbench bench' does: with a list
    the refusals come back beside the records, without one they are raised after the sweep
    (the cells that ran are stored either way)."""
    path = tiny_onnx.save(tiny_onnx.classifier(), tmp_path / "tiny.onnx")
    from dlbench.harness.bench.measure import StopRule

    fast = StopRule(warmup=1, max_warmup=5, min_iterations=3, min_duration_s=0.05)
    ask = dict(batch_sizes=[1, 2, 4], options={"fail": "refuse", "fail_batch": 2}, rule=fast, threads=[1])
    refused: list[str] = []
    records = dlbench.bench([path], ["selftest"], refusals=refused, db=str(tmp_path / "a.db"), **ask)
    assert [(r["batch_size"], r["status"] in ("ok", "unstable")) for r in records] == [(1, True), (4, True)]
    assert len(refused) == 1 and refused[0].endswith("batch 2 offline (1 thread): selftest: refused batch 2")
    with pytest.raises(dlbench.UserError, match="batch 2 offline .*: selftest: refused batch 2$"):
        dlbench.bench(
            [path], ["selftest"], db=str(tmp_path / "b.db"), json_path=str(tmp_path / "b.json"), **ask
        )
    assert [r["batch_size"] for r in json.loads((tmp_path / "b.json").read_text())] == [1, 4]


def test_build_verifies_and_returns_the_record(tmp_path):
    path = tiny_onnx.save(tiny_onnx.classifier(), tmp_path / "tiny.onnx")
    record = dlbench.build(path, "fp16", out=str(tmp_path / "tiny.fp16.onnx"), db=str(tmp_path / "r.db"))
    assert record["status"] == "ok", record.get("error")
    assert (tmp_path / "tiny.fp16.onnx").is_file()


def test_bad_input_is_a_user_error(tmp_path):
    import pytest

    with pytest.raises(dlbench.UserError, match="no such file"):
        dlbench.bench([str(tmp_path / "missing.onnx")], ["onnxruntime"], db=str(tmp_path / "r.db"))


def test_records_carry_the_checkouts_commit():
    """Imported through the dlbench/ links, the package still finds the checkout's .git."""

    from dlbench.harness.machine.fingerprint import fingerprint

    root = ROOT
    if not (root / ".git").exists():
        import pytest

        pytest.skip("not a git checkout")
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert fingerprint()["git_commit"] == head
