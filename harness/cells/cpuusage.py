"""Where a measured window's CPU time went: user or kernel, and how many pages faulted.

A cell whose iterations spend a large share of their CPU time in the kernel is
usually not measuring the framework: it is measuring page faults (an allocator
handing freed activations back to the kernel and faulting them in again), and
``--allocator`` changes its number severalfold.  So every bench cell and training
run reports, over its measured window only (warm-up excluded), the system share
of CPU time, ``system / (user + system)`` from ``getrusage(RUSAGE_SELF)`` (all
the process's threads), and its minor page faults per iteration (a training
step is an iteration).  Above ``KERNEL_BOUND`` the cell is flagged, with a hint.

The same windows also read what the rest of the machine did meanwhile: the busy
time of the CPUs this process may run on (``/proc/stat``'s per-CPU lines, for
the CPUs in its affinity set only, so a container's host cores do not count),
less this process's own CPU time, is other processes' work on our cores; the
hypervisor's ``steal`` is reported beside it.  A figure measured while others
held more than ``CONTENDED_BOUND`` of our CPUs is not the framework's alone, and
every table marks it.  A cell's IQR cannot see this: a steady competitor slows
every iteration alike (one spinning process on one of two cores: a DenseNet-121
cell read 123 ms instead of 55 ms, at an IQR of 5.2 %).  It marks rather than
turns the cell unstable: two cells measured side by side on purpose (the test
suite's two workers on two cores) are contended by design, and the record says
by how much.

Windows may be opened and closed many times (a training loop closes it around
each step, so the reading of real data between steps is left out); the report
sums them.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from dlbench.harness.cells.allocator import MARKER, kernel_hint
from dlbench.harness.stats import CONTENDED_BOUND

# 10 %: a compute-bound CPU cell spends a few per cent in the kernel (scheduling, the
# odd fault); the paging cells seen on ResNet-50 spend 20-40 %.
KERNEL_BOUND = 0.10
# Linux splits a process's CPU time into user and system by sampling at each scheduler
# tick (1-4 ms): the total is exact, the split is not.  Three LeNet-5 steps (a few ms of
# CPU) read 0 s user and 100 % kernel on CI, a false "kernel bound" flag.  Below this much
# CPU time the split is not read as a share at all.
SPLIT_FLOOR_S = 0.05
# /proc/stat counts 10 ms ticks: under 0.2 s of window a tick or two of rounding reads as
# "others 388 %" (seen with --iterations 5 on a 1 ms model), so no share is claimed.
CONTENTION_FLOOR_S = 0.2
# /proc/stat columns: user nice system idle iowait irq softirq steal ...
_BUSY_COLUMNS, _STEAL_COLUMN = (0, 1, 2, 5, 6), 7


def _our_cpus_busy() -> tuple[float, float, int] | None:
    """(busy seconds, steal seconds, CPUs) since boot, summed over the CPUs this process
    may run on; None where /proc/stat or the affinity set cannot be read."""
    try:
        cpus = os.sched_getaffinity(0)
        with open("/proc/stat") as f:
            lines = [ln.split() for ln in f if ln.startswith("cpu") and not ln.startswith("cpu ")]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError):
        return None
    busy = steal = 0
    for fields in lines:
        if int(fields[0][3:]) in cpus:
            ticks = [int(x) for x in fields[1:]]
            busy += sum(ticks[i] for i in _BUSY_COLUMNS)
            steal += ticks[_STEAL_COLUMN] if len(ticks) > _STEAL_COLUMN else 0
    return busy / hz, steal / hz, len(cpus)


class CpuWindow:
    """``begin()`` / ``end()`` pairs around measured work; ``report(iterations)`` after."""

    def __init__(self) -> None:
        self.user_s = self.system_s = 0.0
        self.minor = self.major = 0
        self.wall_s = self.busy_s = self.steal_s = 0.0
        self.cpus: int | None = None
        self._machine_read = True
        self._start: resource.struct_rusage | None = None
        self._machine: tuple[float, float, int] | None = None
        self._wall = 0.0

    def begin(self) -> None:
        self._machine = _our_cpus_busy()
        self._wall = time.perf_counter()
        self._start = resource.getrusage(resource.RUSAGE_SELF)

    def end(self) -> None:
        now, start = resource.getrusage(resource.RUSAGE_SELF), self._start
        if start is None:
            return
        self.wall_s += time.perf_counter() - self._wall
        machine, first = _our_cpus_busy(), self._machine
        if machine is None or first is None:
            self._machine_read = False
        else:
            self.busy_s += machine[0] - first[0]
            self.steal_s += machine[1] - first[1]
            self.cpus = machine[2]
        self.user_s += now.ru_utime - start.ru_utime
        self.system_s += now.ru_stime - start.ru_stime
        self.minor += now.ru_minflt - start.ru_minflt
        self.major += now.ru_majflt - start.ru_majflt
        self._start = None

    def contention(self) -> dict[str, Any] | None:
        """Other processes' and the hypervisor's shares of our CPUs over the windows.
        /proc/stat counts in clock ticks (10 ms), so a window of a few ticks reads
        coarsely; the difference is clipped at zero."""
        if not self._machine_read or not self.cpus or self.wall_s < CONTENTION_FLOOR_S:
            return None  # a few ticks either way read as hundreds of per cent
        capacity = self.wall_s * self.cpus
        others = max(0.0, self.busy_s - self.user_s - self.system_s)
        return {
            "others_share": others / capacity,
            "steal_share": self.steal_s / capacity,
            "cpus": self.cpus,
            "wall_s": self.wall_s,
            "others_s": others,
            "steal_s": self.steal_s,
            "bound": CONTENDED_BOUND,
            "source": "/proc/stat busy time of the CPUs in this process's affinity set, "
            "less its own getrusage time, measured window only",
        }

    def __enter__(self) -> CpuWindow:
        self.begin()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end()

    def report(self, iterations: int) -> dict[str, Any]:
        """The metrics' keys: flat, so tables and JSON readers find them in one place."""
        cpu = self.user_s + self.system_s
        share = self.system_s / cpu if cpu >= SPLIT_FLOOR_S else None
        out = {
            "kernel_share": share,
            "minor_faults_per_iteration": self.minor / iterations if iterations else None,
            "cpu_time": {
                "user_s": self.user_s,
                "system_s": self.system_s,
                "minor_faults": self.minor,
                "major_faults": self.major,
                "iterations": iterations,
                "source": "getrusage(RUSAGE_SELF), measured window only",
                "split_floor_s": SPLIT_FLOOR_S,
            },
        }
        out.update(judge(share))
        contention = self.contention()
        out["contention"] = contention
        out["contended_share"] = (
            None if contention is None else max(contention["others_share"], contention["steal_share"])
        )
        return out


def judge(share: float | None, allocator: str | None = None) -> dict[str, Any]:
    """``kernel_bound`` and, when it is, the hint naming the likely cure."""
    bound = share is not None and share > KERNEL_BOUND
    allocator = allocator or os.environ.get(MARKER)
    return {"kernel_bound": bound, "kernel_hint": kernel_hint(allocator) if bound else None}
