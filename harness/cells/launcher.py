"""Run one cell (a training run, a benchmark cell) in its own process.

Frameworks never share a process: their thread pools and OpenMP runtimes
would fight, a segfault or an out-of-memory kill would take the whole sweep
down, and peak memory could not be attributed.  The child is
``python -m harness.cells.cell KIND IN.json OUT.json``; it writes its result (or
its exception and traceback) and its own resident high-water mark to
OUT.json.  The parent enforces the timeout on the whole process group and
samples the child's resident memory once a second, the only figure left when
a child is killed (out of memory, timeout) before it can report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.atomic import scratch, write_json
from dlbench.harness.cells import allocator, stage

STDERR_TAIL = 4000
# The parent shares the cores with the cell it measures: it sleeps between
# checks and samples the child's memory rarely (the child reports its exact
# high-water mark itself unless it is killed).
RSS_POLL_S = 1.0
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class CellOutcome:
    status: str  # ok | failed | usage_error | timeout
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    traceback: str | None = None
    peak_rss_mb: float | None = None
    wall_s: float = 0.0
    returncode: int | None = None
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _signal_reason(sig: int) -> str:
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    if sig == signal.SIGKILL:
        return f"killed by {name} (the kernel's out-of-memory killer sends this when memory runs out)"
    if sig == signal.SIGSEGV:
        return f"crashed with {name} (segmentation fault inside native code)"
    return f"killed by signal {name}"


# What glibc prints, then aborts, when free() or realloc() get a block its own malloc did
# not make.  Under a preloaded allocator that means a library bound glibc's functions past
# the preload: OpenVINO 2026.4's CPU plugin under jemalloc or tcmalloc, on this project's
# machines, at its first property query.
HEAP_ABORTS = (
    "free(): invalid pointer",
    "munmap_chunk(): invalid pointer",
    "realloc(): invalid pointer",
    "free(): invalid size",
    "double free or corruption",
)


def allocator_clash(tail: str, env: dict[str, str] | None) -> str:
    """Why a cell that ran under a preloaded allocator aborted in glibc's heap checks, in
    words a user can act on; "" when that is not what happened."""
    name = (env or {}).get(allocator.MARKER)
    said = next((m for m in HEAP_ABORTS if m in tail), None)
    if name not in allocator.LIBRARIES or said is None:
        return ""
    return (
        f" (glibc: {said!r}: a block freed by another allocator than the one that made it; "
        f"under the preloaded {name}, a library of this engine calls glibc's own malloc or "
        f"free: --allocator tuned or system runs it)"
    )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def run_cell(
    kind: str,
    payload: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    launcher: Callable[[Path, list[str]], list[str]] | None = None,
) -> CellOutcome:
    """Run one cell to completion or timeout.

    The child's working directory is a scratch directory removed afterwards:
    frameworks that drop files into the current directory (MindSpore writes
    rank_0/ and rewritten_network/) leave nothing behind; paths in ``payload``
    must therefore be absolute.  ``env`` comes from ``cellenv.cell_environment`` (threads
    and the allocator, fixed before the child imports anything); None inherits ours.
    ``launcher`` turns (scratch directory, cell arguments) into the command that starts
    the cell through a framework's launcher (``training.scaling``): its ranks report in
    ``out.json`` (the first rank) and ``out.json.rank<R>`` (the others).
    """
    with scratch("dlbench-cell") as tmp:
        inp, out, log = Path(tmp, "in.json"), Path(tmp, "out.json"), Path(tmp, "log.txt")
        write_json(inp, payload)
        start = time.perf_counter()
        with open(log, "wb") as log_fh:
            cell = [kind, str(inp), str(out)]
            command = (
                launcher(Path(tmp), cell)
                if launcher
                else [sys.executable, "-m", "dlbench.harness.cells.cell", *cell]
            )
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp,
                start_new_session=True,
            )
            try:
                status, polled, timed_out = _wait(proc.pid, start, timeout)
            except BaseException:
                # Ctrl-C: a cell dies with us by its parent-death signal, but a launcher
                # (torchrun, msrun) has none and would keep its ranks training for nobody.
                _kill_group(proc.pid)
                raise
            proc.returncode = os.waitstatus_to_exitcode(status) if status is not None else None
        wall = time.perf_counter() - start
        peak = polled or None
        tail = log.read_text(errors="replace")[-STDERR_TAIL:]
        outcome = CellOutcome(
            status="failed", peak_rss_mb=peak, wall_s=wall, returncode=proc.returncode, log_tail=tail
        )
        if timed_out:
            outcome.status = "timeout"
            outcome.error = f"timed out after {timeout:g} s (the cell was killed{stage.last_words(str(out))})"
            return outcome
        if out.exists():
            reply = json.loads(out.read_text())
            # The child's own high-water mark is exact; polling can miss a spike.
            outcome.peak_rss_mb = max(reply.get("peak_rss_mb") or 0.0, polled) or None
            outcome.status = reply["status"]
            outcome.result = reply.get("result") or {}
            outcome.error = reply.get("error")
            outcome.traceback = reply.get("traceback")
            return outcome
        if (failed_rank := _failed_rank(out)) is not None:
            outcome.error, outcome.traceback = failed_rank
        elif proc.returncode is not None and proc.returncode < 0:
            outcome.error = _signal_reason(-proc.returncode) + (
                allocator_clash(tail, env) or stage.last_words(str(out))
            )
        else:
            outcome.error = (
                f"exited with status {proc.returncode} without a result{stage.last_words(str(out))}"
                + (f": {_last_line(tail)}" if _last_line(tail) else "")
            )
        return outcome


def _failed_rank(out: Path) -> tuple[str, str | None] | None:
    """The first failed rank's own error, when a launcher's cell ended without a result:
    the launcher's last line only says that a rank failed, the rank says why."""
    for path in sorted(out.parent.glob(out.name + ".rank*")):
        try:
            reply = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if reply.get("status") != "ok":
            rank = path.name.rsplit(".rank", 1)[1]
            return f"rank {rank}: {reply.get('error')}", reply.get("traceback")
    return None


def _wait(pid: int, start: float, timeout: float | None) -> tuple[int | None, float, bool]:
    """(wait status, largest sampled RSS in MB, timed out) once the child has ended.

    A helper thread blocks in ``waitpid``; this thread wakes once per
    ``RSS_POLL_S`` to sample memory and check the timeout, so the parent
    barely touches the cores the cell is being measured on.
    """
    box: dict[str, int] = {}
    waiter = threading.Thread(target=lambda: box.update(status=os.waitpid(pid, 0)[1]), daemon=True)
    waiter.start()
    polled = 0.0
    while True:
        polled = max(polled, _rss_mb(pid))
        left = None if timeout is None else timeout - (time.perf_counter() - start)
        if left is not None and left <= 0:
            _kill_group(pid)
            waiter.join()
            return box.get("status"), polled, True
        waiter.join(RSS_POLL_S if left is None else min(RSS_POLL_S, left))
        if not waiter.is_alive():
            return box["status"], polled, False


def _rss_mb(pid: int) -> float:
    """The child's resident memory now (0 if it is gone).

    Read from /proc/PID/statm: one small file, because this runs while the
    cell is being measured, on the same cores.
    """
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _kill_group(pid: int) -> None:
    """Kill the cell's process group and every descendant: a launcher's ranks may run
    in sessions of their own (torchrun starts each in a new one), out of the group's
    reach, and must not outlive the cell."""
    import psutil

    try:
        tree = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        tree = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for child in tree:
        try:
            child.kill()
        except psutil.Error:
            pass


def run_cells(
    kind: str,
    payloads: list[dict[str, Any]],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> list[CellOutcome]:
    """Run several cells of one kind in ONE process, in turn: the trade a caller makes
    on purpose (``--process engine``) when process starts cost more than the cells.

    Each cell keeps its own outcome, wall time and status.  What it gives up is the
    isolation: a cell runs after the earlier ones in the same interpreter (their caches,
    allocator state and thread pools), ``timeout`` bounds each cell only on average (the
    process gets ``timeout`` times the number of cells), and a crash, an out-of-memory
    kill or a hang fails the cell it happened in and every cell after it (the ones before
    keep their results, which the child reports as it goes).
    """
    from dlbench.harness.cells.cell import SHARED

    with scratch("dlbench-cells") as tmp:
        partial = Path(tmp, "done.json")
        whole = run_cell(
            SHARED,
            {"kind": kind, "payloads": payloads, "partial": str(partial)},
            env=env,
            timeout=None if timeout is None else timeout * len(payloads),
        )
        if whole.ok:
            replies = whole.result["cells"]
        else:
            replies = json.loads(partial.read_text()) if partial.exists() else []
    outcomes = [
        CellOutcome(
            status=r["status"],
            result=r.get("result") or {},
            error=r.get("error"),
            traceback=r.get("traceback"),
            peak_rss_mb=r.get("peak_rss_mb"),
            wall_s=r.get("wall_s", 0.0),
            returncode=whole.returncode,
        )
        for r in replies
    ]
    for i in range(len(replies), len(payloads)):
        first = i == len(replies)  # the cell the process ended in
        outcomes.append(
            CellOutcome(
                status=whole.status if first else "failed",
                error=whole.error
                if first
                else f"not run: the process it shared ended in an earlier cell ({whole.error})",
                traceback=whole.traceback if first else None,
                peak_rss_mb=whole.peak_rss_mb if first else None,
                wall_s=whole.wall_s - sum(o.wall_s for o in outcomes) if first else 0.0,
                returncode=whole.returncode,
                log_tail=whole.log_tail,
            )
        )
    return outcomes
