"""Thread settings, decided in the parent and applied before a framework loads.

The seed table's rule for CPU runs: intra-op threads = physical cores (those
this process may run on: ``usable_cores``), inter-op threads = 1.  OpenMP
runtimes read their variables once, at load, so they are exported into the
child's environment rather than set from Python after the framework is
imported.  Whatever is in force is recorded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil

# Variables that change how a CPU framework uses threads; recorded with every run.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "KMP_BLOCKTIME",
    "KMP_AFFINITY",
    "KMP_SETTINGS",
    "OMP_PROC_BIND",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)


def physical_cores() -> int:
    """The machine's physical cores (the fingerprint's figure)."""
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


def allowed_cpus() -> set[int] | None:
    """The logical CPUs this process may run on (taskset, a container's cpuset, a test
    worker's share); None where the platform cannot say."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def usable_cores() -> int:
    """Physical cores among the CPUs this process may run on: the default thread count.
    A run confined to 4 of a host's 64 cores that started 64 threads would time the
    threads' fight (spinning OpenMP barriers on shared cores ran a LeNet cell 28x
    slower here), not the network."""
    cpus = allowed_cpus()
    machine = physical_cores()
    if cpus is None:
        return machine
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(
                (
                    topo.joinpath("physical_package_id").read_text().strip(),
                    topo.joinpath("core_id").read_text().strip(),
                )
            )
        except OSError:
            return max(1, min(len(cpus), machine))
    return max(1, min(len(cores), machine))


def affinity_in_force() -> list[int] | None:
    """The CPUs a run was confined to, where that is fewer than the machine's (None: all)."""
    cpus = allowed_cpus()
    if cpus is None or len(cpus) >= (psutil.cpu_count() or len(cpus)):
        return None
    return sorted(cpus)


@dataclass(frozen=True)
class ThreadConfig:
    intra_op: int
    inter_op: int = 1

    @classmethod
    def default(cls, intra_op: int | None = None, inter_op: int | None = None) -> ThreadConfig:
        return cls(intra_op or usable_cores(), inter_op or 1)

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The child's environment: ``base`` with the OpenMP/MKL counts set.

        Variables the user exported explicitly (KMP_BLOCKTIME, affinity) are kept.
        """
        env = dict(os.environ if base is None else base)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(self.intra_op)
        return env


def in_force(env: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: env[k] for k in THREAD_VARIABLES if k in env}
