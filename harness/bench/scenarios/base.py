"""What a scenario is: a way of feeding a loaded runner, and the figures it reports.

``run(ctx)`` returns the cell's metrics: at least ``throughput_sps``,
``latency_ms`` (mean, p50, p90, p95, p99, min, max, std), ``cv``,
``iterations`` and ``warmup_iterations``.  Inputs for any batch size come
from ``ctx.prepared(batch)``, which synthesizes and places them on the
device outside the timed region (and caches them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlbench.harness.backends.base import Runner
from dlbench.harness.bench.measure import Clock, StopRule


@dataclass
class ScenarioContext:
    runner: Runner
    batch_size: int
    prepared: Callable[[int], Any]
    rule: StopRule
    clock: Clock = field(default_factory=Clock)
    params: dict[str, Any] = field(default_factory=dict)
    # (phase, iterations, elapsed seconds, samples done) after each iteration
    on_iteration: Callable[[str, int, float, int], None] | None = None
    seed: int = 0


class Scenario(ABC):
    name: str = ""

    def batch_sizes(self, requested: list[int]) -> list[int]:
        """The batch sizes this scenario runs, given the ones asked for."""
        return list(requested)

    @abstractmethod
    def run(self, ctx: ScenarioContext) -> dict[str, Any]:
        """Measure; return the metrics."""


def step_for(ctx: ScenarioContext, batch: int) -> Callable[[], None]:
    """One timed unit of work: run a batch and wait for the device."""
    handle = ctx.prepared(batch)
    run, sync = ctx.runner.run, ctx.runner.sync

    def step() -> None:
        run(handle)
        sync()

    return step
