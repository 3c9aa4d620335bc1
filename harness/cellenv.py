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

from dlbench.harness import allocator as allocator_mod
from dlbench.harness.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.threads import ThreadConfig, in_force


def cell_environment(threads: ThreadConfig, allocator: str = DEFAULT_ALLOCATOR,
                     extra: dict[str, str] | None = None,
                     base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (the parent's environment) with the thread counts, a backend's own
    variables (``extra``) and the allocator in force; the allocator goes last, so an
    inherited or extra malloc setting cannot contradict the name that is recorded."""
    env = threads.environment(dict(os.environ if base is None else base))
    env.update(extra or {})
    return allocator_mod.apply(env, allocator)


def context(env: dict[str, str]) -> dict[str, Any]:
    """A record's description of the cell environment: thread variables and allocator."""
    return {"thread_environment": in_force(env), "allocator": allocator_mod.in_force(env)}
