"""Write-then-rename, so that a crash or a full disk never leaves half a file."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from dlbench.core.errors import UserError


def _check_parent(path: Path) -> None:
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise UserError(f"cannot write {path}: {parent} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write {path}: {parent} is not writable")


def check_can_create(path: str | os.PathLike) -> Path:
    """Fail early if ``path`` could not be written, and leave the disk as it was.

    Permission bits are not enough (root passes every ``os.access`` check, and
    /proc or a read-only mount refuse anyway), so this really creates the
    missing parent directories and a probe file, then removes what it made.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory")
    created: list[Path] = []
    parent = path.parent
    missing = []
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    try:
        if not parent.is_dir():
            raise UserError(f"cannot write {path}: {parent} is not a directory")
        for d in reversed(missing):
            try:
                d.mkdir()
            except FileExistsError:  # another process made it meanwhile: not ours to remove
                continue
            created.append(d)
        fd, probe = tempfile.mkstemp(prefix=".dlbench-probe-", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        # Only while still empty: another process (two runs started side by side) may
        # have written into a directory this probe made; its files are not ours.
        for d in reversed(created):  # innermost first
            with contextlib.suppress(OSError):
                d.rmdir()
    return path


def ensure_writable(path: str | os.PathLike) -> Path:
    """Fail early (before any expensive work) if ``path`` could not be written."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory")
    _check_parent(path)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Staged beside ``path`` and renamed over it: a crash or a full disk leaves the old
    file or none, never half of one."""
    path = ensure_writable(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; results and reports are for sharing, so the
        # file gets the mode a plain open() would have given it.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:  # the file it was for, not the staging name (a full disk says which)
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike, obj) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def stage_beside(final: str | os.PathLike) -> Path:
    """A fresh staging folder beside ``final`` (``.NAME.HOST.PID.XXXX.partial``), after the
    stale ones of the same name are swept: those a process of this host left when it was
    killed (SIGKILL, an OOM) before it could clean up.  A folder of a live process, or of
    another host sharing the folder, is never touched."""
    import socket

    final = Path(final)
    host = "".join(c if c.isalnum() or c == "-" else "_" for c in socket.gethostname()) or "host"
    _sweep_dead(final.parent, f".{final.name}.{host}.", ".", "*.partial")
    return Path(
        tempfile.mkdtemp(prefix=f".{final.name}.{host}.{os.getpid()}.", suffix=".partial", dir=final.parent)
    )


@contextmanager
def scratch(prefix: str):
    """A private folder in the system's temporary directory for the block, removed after it.

    Like ``tempfile.TemporaryDirectory``, except that the folder names its process
    (``PREFIX-PID-XXXX``) and the folders of this prefix whose process is dead are swept
    first: a dlbench killed outright (SIGKILL, the OOM killer) cannot remove its own, and
    a sweep of model exports and engines would otherwise fill /tmp run after run."""
    base = Path(tempfile.gettempdir())
    _sweep_dead(base, f"{prefix}-", "-", "*-*")
    path = tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=base)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _sweep_dead(folder: Path, head: str, sep: str, tail: str) -> None:
    """Remove the folders ``HEAD<pid><sep>...`` in ``folder`` (those matching ``HEAD`` +
    ``tail``) whose process is dead: what ``stage_beside`` and ``scratch`` leave behind."""
    for old in folder.glob(glob.escape(head) + tail):
        pid = old.name[len(head) :].split(sep, 1)[0]
        if old.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


@contextmanager
def staged_directory(final: str | os.PathLike):
    """Yield a temporary sibling directory that becomes ``final`` only on success.

    An existing ``final`` is replaced only after the new one is complete.
    """
    final = Path(final)
    if final.exists() and not final.is_dir():
        raise UserError(f"cannot write {final}: it exists and is not a directory")
    _check_parent(final)
    tmp = stage_beside(final)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        old = final.with_name(f".{final.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


@contextmanager
def sole_writer(path: str | os.PathLike, what: str):
    """Hold an exclusive lock on ``path`` (created, with its folder) for the block; a second
    process asking for it gets one line naming the holder.  ``flock`` is released by the
    kernel when its holder exits, even by SIGKILL, so a dead run's lock is simply taken
    over: there is no stale lock to clean.  The file goes when the block ends, and its
    folder too if the block left it empty (a run refused before it wrote anything)."""
    import fcntl
    import time

    path = Path(path)
    made = not path.parent.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UserError(f"{what}: cannot create {path} ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise UserError(f"{what} is being written by {holder}; wait for it, or choose another") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"dlbench PID {os.getpid()} (since {time.strftime('%Y-%m-%d %H:%M:%S')})".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
            if made:
                with contextlib.suppress(OSError):
                    path.parent.rmdir()  # only when empty
    finally:
        os.close(fd)
