"""A disk that fills: every write path says so in one line (exit 2), names the path, and
leaves nothing half-written; the database still passes its integrity check.  On a real
tmpfs, mounted for the test (skipped, with the reason, where this process may not mount)."""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest

from tests.utils import benchmodels
from tests.utils.clitools import assert_usage_error


@pytest.fixture
def full(tmp_path):
    where = tmp_path / "small"
    where.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)]
    made = subprocess.run(mount, capture_output=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip() or 'mount failed'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def _fill(where, leave: int) -> None:
    st = os.statvfs(where)
    (where / "filler").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def test_each_write_path_names_the_full_disk(cli, workdir, full):
    model = benchmodels.mlp(workdir / "mlp.onnx")
    bench = ["bench", str(model), "-b", "onnxruntime", "--iterations", "3"]
    from dlbench.harness.store.results import ResultStore

    ResultStore(full / "r.sqlite").check_writable()  # the schema made while there is room
    _fill(full, 0)
    out = cli(*bench, "--db", str(full / "r.sqlite"))
    # Refused when the database is opened (its journal needs room) or when the record is
    # added (rolled back): one line naming the file either way.
    assert_usage_error(out, str(full / "r.sqlite"), "database or disk is full")
    con = sqlite3.connect(full / "r.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 0
    con.close()
    (full / "filler").unlink()
    _fill(full, 0)
    out = cli(*bench, "--db", str(workdir / "ok.sqlite"), "--json", str(full / "out.json"))
    assert_usage_error(out, f"the disk is full writing {full / 'out.json'}")
    out = cli("report", "--db", str(workdir / "ok.sqlite"), "--out", str(full / "report"))
    assert_usage_error(out, f"the disk is full writing {full / 'report'}")
    assert sorted(p.name for p in full.iterdir()) == ["filler", "r.sqlite"]  # no staging left


def test_a_checkpoint_that_does_not_fit_names_the_disk(cli, workdir, full):
    """torch.save on a full disk says '[enforce fail at inline_container.cc] unexpected pos';
    the training cell's failure says what it was, and the staged checkpoint is removed."""
    _fill(full, 16_000)
    out = cli(
        "train", "lenet5", "-f", "pytorch", "--steps", "2", "--warmup-steps", "1",
        "--out", str(full / "runs"), "--db", str(workdir / "t.sqlite"),
    )  # fmt: skip
    said = out.stdout + out.stderr
    assert out.returncode == 1 and "No space left on device (saving the checkpoint)" in said
    assert "inline_container" not in said
    assert not [p for p in full.rglob("*") if ".partial" in p.name]
