"""The profile cell: the backend's own runner, its profiler over the measured runs.

The runner is the one ``bench`` drives (``backend.runner``: threads, device, precision
and math mode as bench sets them); the profiler is the artifact's backend's, declared in
``profilers.PROFILERS``, whose cell function loads the runner, runs the warm-up outside
the profile and returns each node's time per measured run.  Here: the inputs, planned
as bench plans them, and what every profile reports besides (the runtime, checked for a
silent fallback as bench checks it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbench.core.atomic import scratch
from dlbench.core.registry import resolve
from dlbench.harness.backends import get_backend
from dlbench.harness.backends.base import ArtifactRef, RunConfig, Runner, TensorInfo
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.cells.payload import Payload


@dataclass
class ProfilePayload(Payload):
    WHAT = "profile"
    VERSION = 3

    profiler: str  # its PROFILERS name
    artifact: ArtifactRef
    run: RunConfig
    signature: list[dict[str, Any]]
    batch_size: int
    shapes: dict[str, list[int]]
    int_ranges: dict[str, list[int]]
    graph_ranges: dict[str, list[int]]
    warmup: int
    iterations: int


def run(message: dict[str, Any]) -> dict[str, Any]:
    from dlbench.harness.profile.profilers import PROFILERS

    p = ProfilePayload.from_json(message)
    profiler = PROFILERS.get(p.profiler)
    signature = [TensorInfo(s["name"], s["dtype"], tuple(s["shape"])) for s in p.signature]
    shapes = {k: tuple(v) for k, v in p.shapes.items()}
    int_ranges = {k: (int(v[0]), int(v[1])) for k, v in p.int_ranges.items()}
    ranges = {k: (int(v[0]), int(v[1])) for k, v in p.graph_ranges.items()}
    plan = inputs_mod.plan(signature, p.batch_size, shapes, int_ranges, ranges, {})
    backend = get_backend(profiler.backend)
    feeds = inputs_mod.synthesize(plan, 0)
    plain = unprofiled(backend.runner(p.artifact, p.run), feeds, p.warmup, p.iterations)
    runner = backend.runner(p.artifact, p.run)
    with scratch("dlbench-profile") as tmp:
        profiled = resolve(profiler.cell)(runner, feeds, p.warmup, p.iterations, tmp)
    runtime = runner.runtime()
    runner.verify(runtime)
    return {
        "backend_version": backend.version(),
        "runtime": runtime,
        "inputs": plan.describe(),
        **profiled,
        **plain,
    }


# Seconds the unprofiled runs are timed for at least: every node's time is scaled to
# their time (the synthetic benchmark's workload), so it is measured as bench measures.
PLAIN_MIN_S = 0.3


def unprofiled(runner: Runner, feeds: dict[str, Any], warmup: int, iterations: int) -> dict[str, Any]:
    """The same runs with no profiler, on a runner of their own (ONNX Runtime profiles from
    a session's creation), released before the profiled one loads: a profiler adds its own
    cost to every node it times, a few µs each on a CPU, which at batch 1 was more than
    half of a small CNN's time (resnet50-mini: 0.51 ms of node time, 0.23 ms a run).

    Timed as a bench cell is: its warm-up (longer while the time still falls) and its
    loop, ``iterations`` runs and ``PLAIN_MIN_S`` at least: the window's mean per run,
    and how many runs it took, in how long, after how many warm-up runs.
    ``iterations`` runs alone were 6 ms of a 0.3 ms network, and one scheduler pause in
    them moved a whole reference's target (resnet50-mini's batch-8 run read 5.1 ms
    unprofiled, 2.4 ms profiled)."""
    from dlbench.harness.bench.measure import Clock, StopRule, measure_loop, warm_up

    runner.load()
    try:
        handle = runner.prepare(feeds)

        def step() -> None:
            runner.run(handle)
            runner.sync()

        rule = StopRule(warmup=warmup, min_iterations=iterations, min_duration_s=PLAIN_MIN_S)
        rule.validate()
        clock = Clock()
        warm = warm_up(step, rule, clock)
        times, window = measure_loop(step, rule, clock)
        return {
            "plain_ms_per_run": window * 1000 / len(times),
            "plain_runs": len(times),
            "plain_window_s": window,
            "plain_warmup_runs": warm["iterations"],
        }
    finally:
        runner.close()


def timed_runs(
    runner: Runner,
    handle: Any,
    warmup: int,
    iterations: int,
    profiled: Callable[[], Any] = contextlib.nullcontext,
    each: Callable[[], Any] = contextlib.nullcontext,
) -> float:
    """Warm-up runs, then ``iterations`` runs inside ``profiled()`` (each inside
    ``each()``); wall milliseconds per measured run, device work included."""
    for _ in range(warmup):
        runner.run(handle)
    runner.sync()
    with profiled():
        t0 = time.perf_counter()
        for _ in range(iterations):
            with each():
                runner.run(handle)
        runner.sync()
        return (time.perf_counter() - t0) * 1000 / iterations
