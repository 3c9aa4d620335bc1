"""``core.atomic.check_can_create``: the early check leaves the disk as it was, and never
removes what another process wrote meanwhile (two runs started side by side in one
directory).  Core group."""

from __future__ import annotations

import tempfile

import pytest

from dlbench.core import atomic
from dlbench.core.errors import UserError


def test_the_probe_leaves_no_directory_behind(tmp_path):
    assert atomic.check_can_create(tmp_path / "a" / "b" / "c.json") == tmp_path / "a" / "b" / "c.json"
    assert list(tmp_path.iterdir()) == []


def test_a_directory_another_process_wrote_into_is_kept(tmp_path, monkeypatch):
    """The other process is played by the probe's own mkstemp, which writes beside it
    first: its file and the directories holding it survive the check."""
    real = tempfile.mkstemp

    def other_process_writes_first(*args, **kwargs):
        (tmp_path / "a" / "b" / "manifest.json").write_text("{}")
        return real(*args, **kwargs)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", other_process_writes_first)
    atomic.check_can_create(tmp_path / "a" / "b" / "manifest.json")
    assert (tmp_path / "a" / "b" / "manifest.json").read_text() == "{}"


def test_a_directory_made_meanwhile_is_not_an_error(tmp_path, monkeypatch):
    """Another process creating a missing parent between the look and the mkdir: before,
    'File exists' refused a valid path (two 'dlbench run --print-steps' side by side)."""
    real = atomic.Path.mkdir

    def raced(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(atomic.Path, "mkdir", raced)
    atomic.check_can_create(tmp_path / "x" / "y.json")
    assert (tmp_path / "x").is_dir()  # made by "the other process": not removed


def test_a_file_where_a_directory_must_go_is_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UserError, match="is not a directory"):
        atomic.check_can_create(tmp_path / "f" / "x.json")


HOLD = """
import sys, time
from dlbench.core.atomic import sole_writer
with sole_writer(sys.argv[1], "the folder"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_one_writer_names_the_holder_and_a_dead_ones_lock_is_taken(tmp_path):
    """flock: a second process is refused in one line naming the first; SIGKILL leaves the
    file behind but the kernel freed the lock, so the next writer simply takes it."""
    import os
    import signal
    import subprocess
    import sys

    lock = tmp_path / "w" / ".lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=f"the folder is being written by dlbench PID {holder.pid} "):
            with atomic.sole_writer(lock, "the folder"):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        assert lock.exists()  # a killed holder cleans nothing up
        with atomic.sole_writer(lock, "the folder"):
            assert f"PID {os.getpid()} " in lock.read_text()
        assert not lock.exists() and (tmp_path / "w").is_dir()  # the folder predates this block
    finally:
        holder.kill()
        holder.wait(30)


def test_a_refused_new_run_leaves_no_folder(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic.sole_writer(tmp_path / "new" / ".lock", "x"):
            raise RuntimeError("validation failed")
    assert not (tmp_path / "new").exists()


def test_staging_left_by_a_killed_process_is_swept_by_the_next_writer(tmp_path):
    """A SIGKILL leaves ``.NAME.HOST.PID.XXXX.partial`` behind; the next writer of NAME
    removes those of dead processes on this host, never a live one's or another host's."""
    import os
    import socket
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(done.stdout)  # a process that has exited
    host = "".join(c if c.isalnum() or c == "-" else "_" for c in socket.gethostname()) or "host"
    stale = tmp_path / f".model.onnx.{host}.{pid}.abc.partial"
    live = tmp_path / f".model.onnx.{host}.{os.getpid()}.def.partial"
    elsewhere = tmp_path / f".model.onnx.otherhost.{pid}.ghi.partial"
    other_name = tmp_path / f".other.onnx.{host}.{pid}.jkl.partial"
    for d in (stale, live, elsewhere, other_name):
        (d / "half").mkdir(parents=True)
    fresh = atomic.stage_beside(tmp_path / "model.onnx")
    assert fresh.is_dir() and fresh.name.startswith(f".model.onnx.{host}.{os.getpid()}.")
    assert not stale.exists() and live.exists() and elsewhere.exists() and other_name.exists()


def test_scratch_folders_of_killed_processes_are_swept_and_its_own_removed(tmp_path, monkeypatch):
    """A dlbench killed outright leaves ``/tmp/dlbench-cell-PID-XXXX``; the next scratch of
    that prefix removes the dead processes' folders, never a live one's or another prefix's."""
    import os
    import subprocess
    import sys

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(done.stdout)  # a process that has exited
    stale = tmp_path / f"dlbench-cell-{pid}-abc"
    live = tmp_path / f"dlbench-cell-{os.getpid()}-def"
    other = tmp_path / f"dlbench-bench-{pid}-ghi"
    for d in (stale, live, other):
        (d / "model.onnx").mkdir(parents=True)
    with atomic.scratch("dlbench-cell") as tmp:
        assert os.path.basename(tmp).startswith(f"dlbench-cell-{os.getpid()}-")
        assert not stale.exists() and live.exists() and other.exists()
    assert not os.path.exists(tmp)


def test_bytes_are_staged_renamed_and_shared_like_text(tmp_path):
    """An engine or a cache (write_bytes) gets what a JSON file gets (write_text): parents
    made, the file replaced whole, the mode a plain open() gives, no staging file left,
    and a failed write leaves the old file as it was."""
    import os

    target = tmp_path / "engines" / "m.plan"
    atomic.write_bytes(target, b"\x00\x01old")
    atomic.write_bytes(target, b"\x00\x01new")
    assert target.read_bytes() == b"\x00\x01new"
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
    with pytest.raises(TypeError):
        atomic.write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"\x00\x01new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.plan"]
