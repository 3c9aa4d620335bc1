"""The one place a cell's environment is built, and the one place records describe it.

Thread pools (OpenMP, MKL) and the memory allocator are both fixed when the
cell's process starts: OpenMP reads its variables at load, glibc its malloc
tunables at the first allocation, ld.so its ``LD_PRELOAD`` before ``main``.
So every caller of ``launcher.run_cell`` (train, export, build, verify, eval,
bench, peak) gets its ``env`` from ``cell_environment``, and every record's
context describes that same ``env`` through ``context`` (called by
``records.new_record``): what a record says ran is what the cell was given.
"""

from __future__ import annotations

import os
from typing import Any

from dlbench.harness.cells import allocator as allocator_mod
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.cells.threads import THREAD_VARIABLES, ThreadConfig, affinity_in_force, in_force


def cell_environment(
    threads: ThreadConfig,
    allocator: str = DEFAULT_ALLOCATOR,
    extra: dict[str, str] | None = None,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """``base`` (the parent's environment) with the thread counts, a backend's own
    variables (``extra``) and the allocator in force; the allocator goes last, so an
    inherited or extra malloc setting cannot contradict the name that is recorded."""
    env = threads.environment(dict(os.environ if base is None else base))
    env.update(extra or {})
    return allocator_mod.apply(env, allocator)


def context(env: dict[str, str]) -> dict[str, Any]:
    """A record's description of the cell environment: thread variables, allocator, and
    the CPUs the run was confined to where it was (the default threads follow them)."""
    out = {"thread_environment": in_force(env), "allocator": allocator_mod.in_force(env)}
    if (cpus := affinity_in_force()) is not None:
        out["cpu_affinity"] = cpus
    return out


def _allocator_owned(name: str) -> bool:
    """Variables ``allocator.apply`` rewrites from scratch wherever it runs."""
    return (
        name.startswith(allocator_mod.PREFIXES)
        or name == allocator_mod.MARKER
        or name in ("LD_PRELOAD", "GLIBC_TUNABLES")
    )


def delta(env: dict[str, str], base: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``env`` changes on top of ``base`` (the parent's environment), for a cell that
    starts on another machine: the parent's PATH, library paths and preloads may not hold
    there, so only the changes travel and ``rebuild`` lays them over the worker's own.

    Thread variables travel even where they equal the parent's: the worker's process may
    hold others (Ray sets OMP_NUM_THREADS=1).  Allocator settings travel as the allocator's
    name only, because its library path is a fact of the machine that preloads it.
    """
    base = os.environ if base is None else base
    return {
        "set": {
            k: v
            for k, v in env.items()
            if not _allocator_owned(k) and (base.get(k) != v or k in THREAD_VARIABLES)
        },
        "unset": sorted(k for k in base if k not in env and not _allocator_owned(k)),
        "allocator": env.get(allocator_mod.MARKER),
    }


def rebuild(change: dict[str, Any], base: dict[str, str] | None = None) -> dict[str, str]:
    """The cell environment ``delta`` described, on this machine: ``base`` (this process's
    environment) without the variables the parent's cell did not have and without thread
    settings of its own, then the changes, then the allocator applied here.  Raises UserError
    when the allocator's library is missing on this machine."""
    base = os.environ if base is None else base
    drop = set(change["unset"]) | set(THREAD_VARIABLES)
    env = {k: v for k, v in base.items() if k not in drop}
    env.update(change["set"])
    return allocator_mod.apply(env, change["allocator"]) if change["allocator"] else env
