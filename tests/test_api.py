"""``import dlbench``: the version and the public API the CLI is a layer over."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

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
