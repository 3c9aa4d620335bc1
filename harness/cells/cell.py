"""Child side of ``harness.cells.launcher``: run one cell and report back as JSON.

Kinds map to ``module:function`` so that this module imports nothing heavy;
the function imports its framework itself, after the parent has set the
thread environment.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from dlbench.core.atomic import write_json
from dlbench.core.errors import UserError
from dlbench.harness.cells import stage
from dlbench.harness.cells.allocator import check_loaded

KINDS = {
    "train": "dlbench.harness.training.runner:child",
    # One rank of a data-parallel training cell, started by a framework's launcher.
    "train_rank": "dlbench.harness.training.ranks:child",
    # Conversions: native reference outputs + ONNX/MindIR export (one framework per process),
    # TensorRT engine build + run, and any artifact's outputs through its runner (verify).
    "export": "dlbench.harness.convert.export_cell:child",
    "tensorrt": "dlbench.harness.convert.tensorrt_cell:child",
    "outputs": "dlbench.harness.verify.run:child",
    "probe": "dlbench.harness.usermodel:probe_child",  # a user's model: its signature
    "bench": "dlbench.harness.bench.child:run",
    "peak": "dlbench.harness.bench.peak:child",
    "micro": "dlbench.harness.micro.child:run",  # dlbench micro: one op on one engine
    "eval": "dlbench.harness.evaluate.child:run",  # dlbench eval: accuracy on a held-out split
    "profile": "dlbench.harness.profile.child:run",  # dlbench profile: time per node
    # Used by the tests to exercise crash, hang and memory paths for real.
    "selftest": "dlbench.harness.cells.selftest:child",
}


def resolve(kind: str):
    module, _, func = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), func)


def die_with_parent() -> None:
    """End this cell when the process that launched it dies.

    Cells run in their own session (so a timeout can kill their whole group),
    which also shields them from a signal to the parent's group: a ``dlbench``
    killed with SIGKILL would otherwise leave its cell measuring, and loading
    the machine, for nobody.  Linux only; elsewhere a no-op.
    """
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent == 1 or os.getppid() != parent:  # the parent died before prctl
        os._exit(1)


def launcher_rank() -> tuple[int, int]:
    """(global rank, rank on this node) as the launcher exported them: torchrun's RANK and
    LOCAL_RANK, msrun's RANK_ID and DEVICE_ID, the TensorFlow worker launcher's own."""
    env = os.environ
    local = int(env.get("LOCAL_RANK") or env.get("DLBENCH_LOCAL_RANK") or env.get("DEVICE_ID") or 0)
    rank = int(env.get("RANK") or env.get("DLBENCH_RANK") or env.get("RANK_ID") or local)
    return rank, local


def rank_output(out: str) -> str:
    """Where this rank reports: each node's first rank in ``out`` (every rank holds the
    gathered figures), the others beside it under their global rank.  MindSpore's
    scheduler runs this module too (it trains nothing and reports apart)."""
    if os.environ.get("MS_ROLE") == "MS_SCHED":
        return out + ".scheduler"
    rank, local = launcher_rank()
    return out if local == 0 else f"{out}.rank{rank}"


def main(argv: list[str]) -> int:
    kind, inp, out = argv
    if kind == "train_rank":
        out = rank_output(out)
    die_with_parent()
    stage.keep_at(out)
    with open(inp, encoding="utf-8") as fh:
        payload = json.load(fh)
    reply = _reply(lambda: _run(kind, payload))
    reply["peak_rss_mb"] = own_peak_rss_mb()
    write_json(out, reply)
    return 0


# Several cells of one kind in this one process, in turn (``launcher.run_cells``).
SHARED = "cells"


def many(payload: dict[str, Any]) -> dict[str, Any]:
    """Each cell's reply as a cell of its own would give it, plus its wall time and this
    process's high-water mark so far; the replies so far are rewritten to ``partial``
    after each cell, so that a crash or a hang loses only the cell it happened in."""
    func = resolve(payload["kind"])
    replies = []
    for cell in payload["payloads"]:
        stage.clear()
        start = time.perf_counter()
        reply = _reply(lambda: func(cell))  # noqa: B023 - called before the next iteration
        reply.update(wall_s=time.perf_counter() - start, peak_rss_mb=own_peak_rss_mb())
        replies.append(reply)
        write_json(payload["partial"], replies)
    return {"cells": replies}


def _run(kind: str, payload: dict[str, Any]) -> Any:
    check_loaded()  # a preloaded allocator that ld.so ignored fails the cell (all of them)
    return (many if kind == SHARED else resolve(kind))(payload)


def _reply(call: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {"status": "ok", "result": call()}
    except UserError as exc:
        return {"status": "usage_error", "error": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the parent decides what a failure means
        return {
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }


def own_peak_rss_mb() -> float | None:
    """This process's resident high-water mark since exec (VmHWM).

    The parent cannot use ``wait4``'s ``ru_maxrss`` alone: on Linux it also
    counts what the child inherited from the parent at fork, so a child of a
    1 GB parent would report at least 1 GB.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
