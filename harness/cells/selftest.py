"""A cell that misbehaves on request, so the launcher's failure paths are tested
with real processes: a raise, a hard crash, a hang, a large allocation; and one
that reports the environment and allocator it started with, as the cell sees them."""

from __future__ import annotations

import os
import signal
import time


def child(payload: dict) -> dict:
    action = payload.get("action")
    if action == "raise":
        raise RuntimeError("raised on purpose")
    if action == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if action == "hang":
        time.sleep(3600)
    if action == "exit":
        os._exit(3)
    if action == "allocate":
        block = bytearray(payload["mib"] * 2**20)
        for i in range(0, len(block), 4096):  # touch every page so it is resident
            block[i] = 1
        return {"allocated_mib": payload["mib"]}
    if action == "environment":
        return {"environ": dict(os.environ), "mapped": _mapped_libraries()}
    return {"echo": payload.get("value"), "omp": os.environ.get("OMP_NUM_THREADS")}


def _mapped_libraries() -> list[str]:
    """Every shared object mapped into this process (what LD_PRELOAD really loaded)."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        paths = {line.split()[-1] for line in fh if ".so" in line and "/" in line}
    return sorted(paths)
