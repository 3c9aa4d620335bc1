"""Thread settings, decided in the parent and applied before a framework loads.

The seed table's rule for CPU runs: intra-op threads = physical cores,
inter-op threads = 1.  OpenMP runtimes read their variables once, at load, so
they are exported into the child's environment rather than set from Python
after the framework is imported.  Whatever is in force is recorded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

# Variables that change how a CPU framework uses threads; recorded with every run.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "KMP_BLOCKTIME", "KMP_AFFINITY", "KMP_SETTINGS", "OMP_PROC_BIND",
                    "TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or psutil.cpu_count() or 1


@dataclass(frozen=True)
class ThreadConfig:
    intra_op: int
    inter_op: int = 1

    @classmethod
    def default(cls, intra_op: int | None = None, inter_op: int | None = None) -> "ThreadConfig":
        return cls(intra_op or physical_cores(), inter_op or 1)

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
