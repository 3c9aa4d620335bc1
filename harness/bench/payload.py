"""What crosses the process boundary into a bench cell: one typed, versioned message.

The parent (``bench.execute``) and the cell's process (``bench.child``) may run
different code: a cell under ``--with`` imports another environment's packages, a
Ray worker another machine's checkout.  An untyped dict of sixteen keys let a
renamed field turn into a KeyError deep in a measurement; a ``CellPayload`` is
built in one place, written as JSON with its ``version``, and read back with the
version checked first, so a mismatch is one clear line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dlbench.core.tensors import TensorInfo
from dlbench.harness.backends.base import ArtifactRef, RunConfig
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.cells.payload import PayloadMismatch, check_version

# Bumped whenever a field changes meaning or name; the child refuses any other.
VERSION = 1


__all__ = ["VERSION", "CellPayload", "PayloadMismatch"]


def _pairs(d: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v) for k, v in d.items()}


@dataclass
class CellPayload:
    backend: str
    artifact: ArtifactRef
    run: RunConfig
    scenario: str
    batch_size: int
    rule: StopRule
    # --shape, --int-range and the graph's own index ranges, by input name.
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    int_ranges: dict[str, tuple[int, ...]] = field(default_factory=dict)
    graph_ranges: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # --input: a value or a file (path, sha256), as bench.given writes them.
    given: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The parent's reading of the graph (dynamic dimensions by name); None: ask the engine.
    signature: list[TensorInfo] | None = None
    scenario_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    progress_path: str | None = None
    # Under --with: report the packages the cell imported.
    packages: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["signature"] = (
            None
            if self.signature is None
            else [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in self.signature]
        )
        for key in ("shapes", "int_ranges", "graph_ranges"):
            d[key] = {k: list(v) for k, v in d[key].items()}
        return {"version": VERSION, **d}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CellPayload:
        check_version("bench", d, VERSION)
        sig = d.get("signature")
        return cls(
            backend=d["backend"],
            artifact=ArtifactRef(**d["artifact"]),
            run=RunConfig(**d["run"]),
            scenario=d["scenario"],
            batch_size=int(d["batch_size"]),
            rule=StopRule(**d["rule"]),
            shapes=_pairs(d.get("shapes") or {}),
            int_ranges=_pairs(d.get("int_ranges") or {}),
            graph_ranges=_pairs(d.get("graph_ranges") or {}),
            given=dict(d.get("given") or {}),
            signature=None
            if sig is None
            else [TensorInfo(t["name"], t["dtype"], tuple(t["shape"])) for t in sig],
            scenario_params=dict(d.get("scenario_params") or {}),
            seed=int(d.get("seed", 0)),
            progress_path=d.get("progress_path"),
            packages=bool(d.get("packages")),
        )
