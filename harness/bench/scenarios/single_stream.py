"""Single-stream: one query at a time, batch 1; the latency percentiles are the result."""

from __future__ import annotations

from typing import Any

from dlbench.harness.bench.scenarios.base import ScenarioContext
from dlbench.harness.bench.scenarios.offline import Offline


class SingleStream(Offline):
    name = "single-stream"

    def batch_sizes(self, requested: list[int]) -> list[int]:
        return [1]

    def run(self, ctx: ScenarioContext) -> dict[str, Any]:
        ctx.batch_size = 1
        return super().run(ctx)


SCENARIO = SingleStream()
