"""``dlbench train`` end to end, through the real CLI and the real frameworks.

These run the frameworks in the CLI's own subprocesses, so they belong to the
core test group.
"""

import json
import sqlite3

import numpy as np
import pytest

from tests.utils.frameworks import FRAMEWORKS


def test_train_three_frameworks_records_everything(cli, workdir):
    out = cli(
        "train",
        "resnet50-mini",
        "-f",
        ",".join(FRAMEWORKS),
        "--batch-size",
        "16",
        "--warmup-steps",
        "2",
        "--steps",
        "16",
        "--threads",
        "2",
        "--json",
        "train.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = json.loads((workdir / "train.json").read_text())
    assert [r["framework"] for r in records] == list(FRAMEWORKS)
    for r in records:
        m = r["metrics"]
        assert r["status"] == "ok" and r["throughput_sps"] > 0
        assert r["throughput_sps"] == m["throughput_sps"]
        # throughput is the window's: samples / window wall time
        assert r["throughput_sps"] * m["window_s"] == pytest.approx(16 * 16)
        assert len(m["step_times_s"]) == 16 and len(m["warmup_times_s"]) == 2
        assert sum(m["step_times_s"]) <= m["window_s"]
        losses = m["losses"]
        assert np.mean(losses[-3:]) < np.mean(losses[:3]), (r["framework"], losses)
        assert r["peak_rss_mb"] > 50
        assert r["intra_op_threads"] == 2 and r["inter_op_threads"] == 1
        assert r["context"]["thread_environment"]["OMP_NUM_THREADS"] == "2"
        assert r["framework_version"]
        manifest = json.loads(
            (workdir / "runs" / "resnet50-mini" / r["framework"] / "manifest.json").read_text()
        )
        assert manifest["model"] == "resnet50-mini" and manifest["steps"] == 16
        assert manifest["framework_version"] == r["framework_version"]
        assert (workdir / "runs" / "resnet50-mini" / r["framework"] / manifest["checkpoint"]).is_file()
    suffixes = {
        r["framework"]: json.loads(
            (workdir / "runs" / "resnet50-mini" / r["framework"] / "manifest.json").read_text()
        )["checkpoint"]
        for r in records
    }
    assert suffixes == {"pytorch": "model.pt", "tensorflow": "model.keras", "mindspore": "model.ckpt"}
    assert not list((workdir / "runs" / "resnet50-mini").glob(".*partial"))

    con = sqlite3.connect(workdir / "results.sqlite")
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM records ORDER BY id").fetchall()
    assert len(rows) == 3 and len({r["run_id"] for r in rows}) == 1
    for row, rec in zip(rows, records):
        assert row["id"] == rec["id"]
        assert row["kind"] == "train" and row["model"] == "resnet50-mini"
        assert row["device"] == "cpu" and row["precision"] == "fp32" and row["batch_size"] == 16
        assert row["iterations"] == 16 and row["warmup_iterations"] == 2
        assert row["dlbench_version"] and row["started_at"]
        assert row["command_line"].startswith("dlbench train resnet50-mini")
        assert row["throughput_sps"] == rec["throughput_sps"]
    [machine] = con.execute("SELECT * FROM machines").fetchall()
    assert machine["machine_id"] == rows[0]["machine_id"]
    assert json.loads(machine["fingerprint"])["cpu"]["physical_cores"] >= 1
    for fw in ("PyTorch", "TensorFlow", "MindSpore"):
        assert fw in out.stdout
    assert "ResNet-50 v1.5 (1/8 width, 64px)" in out.stdout


def test_a_failed_run_is_recorded_and_leaves_no_checkpoint(cli, workdir):
    out = cli(
        "train", "resnet50-mini", "-f", "tensorflow", "--steps", "2", "--timeout", "0.5", "--json", "t.json"
    )
    assert out.returncode == 1
    [rec] = json.loads((workdir / "t.json").read_text())
    assert rec["status"] == "failed" and "timed out after 0.5 s" in rec["error"]
    assert not (workdir / "runs" / "resnet50-mini" / "tensorflow").exists()
    assert "FAILED" in out.stdout
    con = sqlite3.connect(workdir / "results.sqlite")
    assert con.execute("SELECT status FROM records").fetchall() == [("failed",)]


def test_train_from_an_npz_file(cli, workdir):
    rng = np.random.default_rng(1)
    np.savez(
        workdir / "data.npz",
        x=rng.standard_normal((40, 3, 64, 64)).astype(np.float32),
        y=rng.integers(0, 10, 40),
    )
    out = cli(
        "train",
        "resnet50-mini",
        "-f",
        "pytorch",
        "--batch-size",
        "8",
        "--steps",
        "3",
        "--warmup-steps",
        "1",
        "--data",
        "data.npz",
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    [rec] = json.loads((workdir / "t.json").read_text())
    assert rec["context"]["config"]["data"] == str(workdir / "data.npz")
    bad = workdir / "bad.npz"
    np.savez(bad, x=np.zeros((4, 3, 32, 32), np.float32), y=np.zeros(4, np.int64))
    out = cli("train", "resnet50-mini", "-f", "pytorch", "--data", "bad.npz")
    assert out.returncode == 2 and "x has shape (4, 3, 32, 32)" in out.stderr
