"""What crosses the process boundary into a ``micro`` cell: one typed, versioned message
(``harness.cells.payload``).  The op travels as its own dict (an ``Op`` or a layer, told
apart by its kind when read back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlbench.harness.bench.measure import StopRule
from dlbench.harness.cells.payload import Payload


@dataclass
class MicroPayload(Payload):
    WHAT = "micro"
    VERSION = 1

    op: dict[str, Any]  # Op.to_dict() or layers.Layer.to_dict()
    engine: str
    precision: str
    device: str
    threads: int
    rule: StopRule = field(default_factory=StopRule)
    seed: int = 0
    mode: str = ""  # a layer's: forward or train
    # Under --with: report the packages the cell imported.
    packages: bool = False
