"""One rank of a data-parallel training cell (worker side of ``training.scaling``).

Each rank runs the same timed loop as a single-process run, pinned to its
share of the cores and on its own data; ``training.gather`` puts every rank's
figures together.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dlbench.harness.cells.cell import launcher_rank
from dlbench.harness.cells.envs import imported_packages
from dlbench.harness.training.payload import TrainPayload


def pin_cpus(local: int, per_node: int) -> list[int]:
    """Pin this rank to its own share of the cores it may use: ranks of one node that
    float over all cores evict each other's caches and threads.  More ranks than cores
    share them round-robin."""
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // per_node
    mine = cpus[local * share : (local + 1) * share] if share else [cpus[local % len(cpus)]]
    os.sched_setaffinity(0, mine)
    return mine


def child(message: dict[str, Any]) -> dict[str, Any]:
    """The ``train_rank`` cell: this rank's training, with every rank's figures."""
    from dlbench.harness.training.loop import run
    from dlbench.harness.training.user import from_dict

    payload = TrainPayload.from_json(message)
    cfg = payload.config
    rank, local = launcher_rank()
    cpus = pin_cpus(local, payload.devices_per_node or 1) if cfg.device == "cpu" else None
    spec = from_dict(payload.user) if payload.user else None
    result = run(cfg, Path(payload.out_dir), spec, rank=rank)
    result["runtime"].update(rank=rank, local_rank=local, cpus=cpus)
    return {**result, "packages": imported_packages() if payload.packages else None}
