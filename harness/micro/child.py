"""One micro cell, in its own process (the ``micro`` kind of ``harness.cell``).

Inputs are made and handed to the engine before the clock; the first call is
timed alone (it often pays for a kernel choice or a JIT), then the bench loop
warms up until stable and measures.  The result is checked against numpy
after the clock stops, so a wrong or skipped kernel fails the cell.
"""
from __future__ import annotations

import time
from importlib import metadata
from typing import Any

from dlbench.harness.bench.measure import Clock, StopRule, measure
from dlbench.harness.micro import engines
from dlbench.harness.micro.ops import Op


def run(payload: dict[str, Any]) -> dict[str, Any]:
    op = Op.from_dict(payload["op"])
    precision, device = payload["precision"], payload["device"]
    engine = engines.module(payload["engine"])
    t0 = time.perf_counter()
    inputs = engines.make_inputs(op, precision, int(payload.get("seed", 0)))
    kernel = engine.build(op, precision, device, inputs, int(payload["threads"]))
    prepare_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kernel.step()
    first_ms = (time.perf_counter() - t0) * 1000
    rule = StopRule(**payload["rule"])
    metrics = measure(kernel.step, 1, rule, Clock())
    error = engines.check(op, precision, inputs, kernel)
    return {"metrics": {**metrics, "prepare_s": prepare_s, "first_call_ms": first_ms,
                        "relative_error": error},
            "runtime": {"library": kernel.library, "layout": kernel.layout,
                        "notes": kernel.notes, "math_mode": kernel.math,
                        "version": _version(engine.FRAMEWORK),
                        # Under --with, the whole environment the cell imported from.
                        "packages": _packages() if payload.get("packages") else None}}


def _packages() -> list[str]:
    """Name==version of what this process imports: the first of each name on sys.path,
    as the import system picks it (an overlay's version shadows the installed one)."""
    seen: dict[str, str] = {}
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name:
            seen.setdefault(name.lower().replace("_", "-"), f"{name}=={d.version}")
    return sorted(seen.values())


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
