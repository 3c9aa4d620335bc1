"""What crosses the process boundary into a training cell (``train`` or ``train_rank``):
one typed, versioned message (``harness.cells.payload``), built by the runner and read
by the cell, whichever launcher started it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlbench.harness.cells.payload import Payload
from dlbench.harness.training.base import TrainConfig


@dataclass
class TrainPayload(Payload):
    WHAT = "training"
    VERSION = 1  # bumped whenever a field changes meaning or name; the cell refuses any other

    config: TrainConfig
    out_dir: str  # the staged checkpoint directory
    # A user's own model's spec (training.user.to_dict), None for a zoo model.
    user: dict[str, Any] | None = None
    # Under --with: report the packages the cell imported.
    packages: bool = False
    # Data-parallel scaling: the devices of each node (each rank pins its share of the CPUs).
    devices_per_node: int | None = None
