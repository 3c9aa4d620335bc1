"""What crosses the process boundary into a training cell (``train`` or ``train_rank``):
one typed, versioned message (``harness.cells.payload``), built by the runner and read
by the cell, whichever launcher started it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlbench.harness.cells.payload import check_version
from dlbench.harness.training.base import TrainConfig

# Bumped whenever a field changes meaning or name; the cell refuses any other.
VERSION = 1


@dataclass
class TrainPayload:
    config: TrainConfig
    out_dir: str  # the staged checkpoint directory
    # A user's own model's spec (training.user.to_dict), None for a zoo model.
    user: dict[str, Any] | None = None
    # Under --with: report the packages the cell imported.
    packages: bool = False
    # Data-parallel scaling: the devices of each node (each rank pins its share of the CPUs).
    devices_per_node: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "config": self.config.to_dict(),
            "out_dir": self.out_dir,
            "user": self.user,
            "packages": self.packages,
            "devices_per_node": self.devices_per_node,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainPayload:
        check_version("training", d, VERSION)
        return cls(
            config=TrainConfig(**d["config"]),
            out_dir=d["out_dir"],
            user=d.get("user"),
            packages=bool(d.get("packages")),
            devices_per_node=d.get("devices_per_node"),
        )
