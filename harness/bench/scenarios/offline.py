"""Offline: every batch is ready at once; maximum throughput at the batch size."""

from __future__ import annotations

from typing import Any

from dlbench.harness.bench.measure import measure
from dlbench.harness.bench.scenarios.base import Scenario, ScenarioContext, step_for


class Offline(Scenario):
    name = "offline"

    def run(self, ctx: ScenarioContext) -> dict[str, Any]:
        step = step_for(ctx, ctx.batch_size)
        batch, notify = ctx.batch_size, ctx.on_iteration

        def report(n: int, elapsed: float) -> None:
            notify("measure", n, elapsed, n * batch)

        return measure(
            step,
            batch,
            ctx.rule,
            ctx.clock,
            report if notify else None,
            after_warmup=ctx.runner.reset_device_times,
        )


SCENARIO = Offline()
