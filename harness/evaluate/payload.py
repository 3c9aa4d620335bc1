"""What crosses the process boundary into an ``eval`` cell: one typed, versioned
message (``harness.cells.payload``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlbench.harness.backends.base import ArtifactRef, RunConfig
from dlbench.harness.cells.payload import Payload


@dataclass
class EvalPayload(Payload):
    WHAT = "eval"
    VERSION = 1

    backend: str
    artifact: ArtifactRef
    run: RunConfig
    data: str  # the data argument (harness.data: a name or PATH)
    batch_size: int
    limit: int | None = None
    # What the data reader needs of the model: its zoo name, image shape, class count.
    spec: dict[str, Any] = field(default_factory=dict)
