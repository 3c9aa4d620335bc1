"""A cell that misbehaves on request, so the launcher's failure paths are tested
with real processes: a raise, a hard crash, a hang, a large allocation, a block freed by
another allocator than the one that made it, each in a step it names or not; and one
that reports the environment and allocator it started with, as the cell sees them."""

from __future__ import annotations

import os
import signal
import time


def child(payload: dict) -> dict:
    action = payload.get("action")
    if payload.get("stage"):  # the step (and its hint) the action happens in
        from dlbench.harness.cells import stage

        stage.enter(*payload["stage"])
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
    if action == "foreign_free":
        return _foreign_free()
    if action == "environment":
        return {"environ": dict(os.environ), "mapped": _mapped_libraries()}
    return {"echo": payload.get("value"), "omp": os.environ.get("OMP_NUM_THREADS")}


def _foreign_free() -> dict:
    """What OpenVINO's CPU plugin does under a preloaded jemalloc or tcmalloc (2026.4, seen
    here): a block made by the process's malloc, the preloaded one, handed to glibc's own
    free.  glibc aborts ("free(): invalid pointer"); without a preload both are glibc's."""
    import ctypes

    process = ctypes.CDLL(None)
    process.malloc.restype = ctypes.c_void_p
    blocks = [process.malloc(64) for _ in range(8)]
    glibc = ctypes.CDLL("libc.so.6")
    glibc.free.argtypes = [ctypes.c_void_p]
    glibc.free(blocks[4])
    return {"freed": True}


def _mapped_libraries() -> list[str]:
    """Every shared object mapped into this process (what LD_PRELOAD really loaded)."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        paths = {line.split()[-1] for line in fh if ".so" in line and "/" in line}
    return sorted(paths)
