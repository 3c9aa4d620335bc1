"""One micro cell, in its own process (the ``micro`` kind of ``harness.cells.cell``).

Inputs are made and handed to the engine before the clock; the first call is
timed alone (it often pays for a kernel choice or a JIT), then the bench loop
warms up until stable and measures.  The result is checked against numpy
after the clock stops, so a wrong or skipped kernel fails the cell.
"""

from __future__ import annotations

import time
from typing import Any

from dlbench.harness.bench.measure import Clock, measure
from dlbench.harness.cells.envs import imported_packages
from dlbench.harness.machine.frameworks import distribution_version
from dlbench.harness.micro import engines, layers
from dlbench.harness.micro.ops import Op
from dlbench.harness.micro.payload import MicroPayload


def run(message: dict[str, Any]) -> dict[str, Any]:
    payload = MicroPayload.from_json(message)
    op = (layers.Layer if payload.op["kind"] == "layer" else Op).from_dict(payload.op)
    precision, device, mode = payload.precision, payload.device, payload.mode
    layer = op.kind == "layer"
    engine = engines.module(payload.engine, layer)
    seed, threads = payload.seed, payload.threads
    t0 = time.perf_counter()
    if layer:
        inputs = layers.arrays(op, seed)
        kernel = engine.build(op, mode, precision, device, inputs, threads)
    else:
        inputs = engines.make_inputs(op, precision, seed)
        kernel = engine.build(op, precision, device, inputs, threads)
    prepare_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kernel.step()
    first_ms = (time.perf_counter() - t0) * 1000
    metrics = measure(kernel.step, 1, payload.rule, Clock())
    # A layer is compared with the other engines' by the parent; an op with numpy here.
    checked = (
        {"sample": _sample(kernel)}
        if layer
        else {"relative_error": engines.check(op, precision, inputs, kernel)}
    )
    return {
        "metrics": {**metrics, "prepare_s": prepare_s, "first_call_ms": first_ms, **checked},
        "runtime": {
            "library": kernel.library,
            "layout": kernel.layout,
            "notes": kernel.notes,
            "math_mode": kernel.math,
            "version": distribution_version(engine.FRAMEWORK),
            # Under --with, the whole environment the cell imported from.
            "packages": imported_packages() if payload.packages else None,
        },
    }


SAMPLE = 256  # values of a layer's output (and gradient) the parent compares


def _sample(kernel) -> dict[str, Any]:
    out = kernel.output()
    sample = {"shape": list(out.shape), "output": out.reshape(-1)[:SAMPLE].tolist()}
    if kernel.grad is not None:
        grad = kernel.grad()
        sample.update(grad_shape=list(grad.shape), grad=grad.reshape(-1)[:SAMPLE].tolist())
    return sample
