"""Where a measured window's CPU time went: user or kernel, and how many pages faulted.

A cell whose iterations spend a large share of their CPU time in the kernel is
usually not measuring the framework: it is measuring page faults (an allocator
handing freed activations back to the kernel and faulting them in again), and
``--allocator`` changes its number severalfold.  So every bench cell and training
run reports, over its measured window only (warm-up excluded), the system share
of CPU time, ``system / (user + system)`` from ``getrusage(RUSAGE_SELF)`` (all
the process's threads), and its minor page faults per iteration (a training
step is an iteration).  Above ``KERNEL_BOUND`` the cell is flagged, with a hint.

Windows may be opened and closed many times (a training loop closes it around
each step, so the reading of real data between steps is left out); the report
sums them.
"""
from __future__ import annotations

import os
import resource
from typing import Any

from dlbench.harness.allocator import MARKER, kernel_hint

# 10 %: a compute-bound CPU cell spends a few per cent in the kernel (scheduling, the
# odd fault); the paging cells seen on ResNet-50 spend 20-40 %.
KERNEL_BOUND = 0.10


class CpuWindow:
    """``begin()`` / ``end()`` pairs around measured work; ``report(iterations)`` after."""

    def __init__(self) -> None:
        self.user_s = self.system_s = 0.0
        self.minor = self.major = 0
        self._start: resource.struct_rusage | None = None

    def begin(self) -> None:
        self._start = resource.getrusage(resource.RUSAGE_SELF)

    def end(self) -> None:
        now, start = resource.getrusage(resource.RUSAGE_SELF), self._start
        if start is None:
            return
        self.user_s += now.ru_utime - start.ru_utime
        self.system_s += now.ru_stime - start.ru_stime
        self.minor += now.ru_minflt - start.ru_minflt
        self.major += now.ru_majflt - start.ru_majflt
        self._start = None

    def __enter__(self) -> "CpuWindow":
        self.begin()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end()

    def report(self, iterations: int) -> dict[str, Any]:
        """The metrics' keys: flat, so tables and JSON readers find them in one place."""
        cpu = self.user_s + self.system_s
        share = self.system_s / cpu if cpu > 0 else None
        out = {
            "kernel_share": share,
            "minor_faults_per_iteration": self.minor / iterations if iterations else None,
            "cpu_time": {"user_s": self.user_s, "system_s": self.system_s,
                         "minor_faults": self.minor, "major_faults": self.major,
                         "iterations": iterations, "source": "getrusage(RUSAGE_SELF), "
                         "measured window only"},
        }
        out.update(judge(share))
        return out


def judge(share: float | None, allocator: str | None = None) -> dict[str, Any]:
    """``kernel_bound`` and, when it is, the hint naming the likely cure."""
    bound = share is not None and share > KERNEL_BOUND
    allocator = allocator or os.environ.get(MARKER)
    return {"kernel_bound": bound, "kernel_hint": kernel_hint(allocator) if bound else None}
