"""Server: queries arrive as a Poisson process; a batcher groups them; latency is per query.

One point at a target rate ``qps``:

* arrival times are drawn up front (exponential gaps, seeded), so the
  generator costs nothing while the clock runs;
* the batcher takes the oldest waiting query and waits until ``max_batch``
  queries are waiting or the oldest has waited ``max_wait_ms``, then runs
  them as one batch; the device runs one batch at a time;
* a batch of ``b`` queries runs on the smallest prepared bucket that holds
  it (powers of two up to the cell's batch size, which is the maximum
  batch; a fixed-batch model has one bucket), as an inference server with
  preferred batch sizes does; the padding is real work and is counted;
* each query's latency is its completion time minus its arrival time:
  queueing, batching wait, padding and compute.

The point's throughput is completed queries over the time from the first
arrival to the last completion.  With ``latency_bound_ms`` the scenario
searches (bisection) for the highest rate whose p99 latency stays within the
bound; without it, it runs the rates in ``qps`` or a ladder of fractions of
the estimated capacity (max batch / service time at max batch).  Every
point is reported; the cell's headline is the best point that meets the
bound (or the highest-throughput point when there is no bound).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dlbench.harness import stats
from dlbench.harness.bench.measure import summarize_latency, warm_up
from dlbench.harness.bench.scenarios.base import Scenario, ScenarioContext, step_for
from dlbench.harness.cells.cpuusage import CpuWindow

DEFAULT_MAX_WAIT_MS = 2.0
LADDER = (0.25, 0.5, 0.75, 0.9)
SEARCH_STEPS = 7
# Stop a point early once this share of queries is over the bound: its p99 is over too.
OVER_BOUND_SHARE = 0.01


def buckets_for(max_batch: int) -> list[int]:
    out, b = [], 1
    while b < max_batch:
        out.append(b)
        b *= 2
    return out + [max_batch]


class Server(Scenario):
    name = "server"

    def run(self, ctx: ScenarioContext) -> dict[str, Any]:
        p = ctx.params
        max_batch = ctx.batch_size
        max_wait = float(p.get("max_wait_ms", DEFAULT_MAX_WAIT_MS)) / 1000
        bound_ms = p.get("latency_bound_ms")
        buckets = [max_batch] if p.get("fixed_batch") else buckets_for(max_batch)

        # Warm every bucket, and estimate the service time of each from its warm-up tail.
        service, warmups = {}, 0
        for b in buckets:
            warm = warm_up(step_for(ctx, b), ctx.rule, ctx.clock)
            warmups += warm["iterations"]
            tail = warm["times_s"][-3:] or [self._time_one(ctx, b)]
            service[b] = stats.median(tail)
        ctx.runner.reset_device_times()
        cpu = CpuWindow()  # every point's batches: the measured window
        cpu.begin()
        capacity = max_batch / service[max_batch]

        points: list[dict[str, Any]] = []
        if bound_ms is not None:
            best = self._search(ctx, buckets, max_batch, max_wait, float(bound_ms), service, capacity, points)
        else:
            rates = p.get("qps") or [round(f * capacity, 3) for f in LADDER]
            for i, qps in enumerate(rates):
                points.append(self._point(ctx, buckets, max_batch, max_wait, float(qps), i, None))
            best = max(points, key=lambda pt: pt["achieved_qps"])

        out: dict[str, Any] = {
            "server": {
                "max_batch": max_batch,
                "max_wait_ms": max_wait * 1000,
                "buckets": buckets,
                "service_ms": {str(b): t * 1000 for b, t in service.items()},
                "estimated_capacity_qps": capacity,
                "latency_bound_ms": bound_ms,
                "points": [{k: v for k, v in pt.items() if k != "_raw"} for pt in points],
                "found_qps": None if best is None else best["target_qps"],
            },
            "warmup_iterations": warmups,
        }
        cpu.end()
        out.update(cpu.report(sum(pt["batches"] for pt in points)))
        if best is None:
            out.update(
                {
                    "throughput_sps": 0.0,
                    "iterations": 0,
                    "latency_ms": None,
                    "cv": None,
                    "no_feasible_rate": f"no rate met p99 <= {bound_ms:g} ms (service time "
                    f"at batch 1 is {service[buckets[0]] * 1000:.3g} ms)",
                }
            )
            return out
        out.update(
            {
                "throughput_sps": best["achieved_qps"],
                "iterations": best["queries"],
                "samples": best["queries"],
                "window_s": best["duration_s"],
                "latency_ms": best["latency_ms"],
                "cv": best["cv"],
                "percentile_support": best["percentile_support"],
                "latency_samples_ms": [round(x, 6) for x in best["_raw"]],
                "latency_samples_stride": 1,
            }
        )
        return out

    @staticmethod
    def _time_one(ctx: ScenarioContext, b: int) -> float:
        step = step_for(ctx, b)
        t0 = ctx.clock.now()
        step()
        return ctx.clock.now() - t0

    def _search(self, ctx, buckets, max_batch, max_wait, bound_ms, service, capacity, points):
        bound = bound_ms / 1000
        if service[buckets[0]] > bound:
            return None
        lo, hi, best = 0.0, capacity * 1.1, None
        for i in range(int(ctx.params.get("search_steps", SEARCH_STEPS))):
            qps = (lo + hi) / 2
            pt = self._point(ctx, buckets, max_batch, max_wait, qps, i, bound)
            points.append(pt)
            if pt["meets_bound"]:
                lo, best = qps, pt
            else:
                hi = qps
        return best

    def _point(
        self,
        ctx: ScenarioContext,
        buckets: list[int],
        max_batch: int,
        max_wait: float,
        qps: float,
        index: int,
        bound: float | None,
    ) -> dict[str, Any]:
        rule, clock = ctx.rule, ctx.clock
        n = rule.iterations or max(rule.min_iterations, math.ceil(qps * rule.min_duration_s))
        rng = np.random.default_rng(ctx.seed + 1000 + index)
        arrivals = np.cumsum(rng.exponential(1.0 / qps, size=n))
        steps = {b: step_for(ctx, b) for b in buckets}
        latency = np.empty(n)
        batch_sizes: list[int] = []
        over, over_limit = 0, max(1, int(OVER_BOUND_SHARE * n))
        start = clock.now()
        arrivals = arrivals + start  # absolute times: no rounding between frames
        i, done = 0, start
        while i < n:
            now = clock.now()
            if arrivals[i] > now:
                clock.sleep_until(arrivals[i])
                now = clock.now()
            deadline = arrivals[i] + max_wait
            j = int(np.searchsorted(arrivals, now, side="right"))
            while j - i < max_batch and now < deadline:
                nxt = arrivals[j] if j < n else math.inf
                clock.sleep_until(min(deadline, nxt))
                now = clock.now()
                j = int(np.searchsorted(arrivals, now, side="right"))
            b = min(j - i, max_batch)
            bucket = next(x for x in buckets if x >= b)
            steps[bucket]()
            done = clock.now()
            latency[i : i + b] = done - arrivals[i : i + b]
            batch_sizes.append(b)
            if bound is not None:
                over += int(np.count_nonzero(latency[i : i + b] > bound))
            i += b
            if ctx.on_iteration is not None:
                ctx.on_iteration(f"server {qps:.4g} qps", len(batch_sizes), done - start, i)
            if bound is not None and over > over_limit:
                break
        served = latency[:i]
        summary = summarize_latency(list(served))
        duration = done - float(arrivals[0])
        point = {
            "target_qps": qps,
            "queries": int(i),
            "planned_queries": int(n),
            "stopped_early": bool(i < n),
            "achieved_qps": i / duration if duration > 0 else 0.0,
            "duration_s": duration,
            "batches": len(batch_sizes),
            "mean_batch": float(np.mean(batch_sizes)) if batch_sizes else 0.0,
            **summary,
            "_raw": list(served * 1000),
        }
        if bound is not None:
            point["meets_bound"] = bool(i == n and summary["latency_ms"]["p99"] <= bound * 1000)
        return point


SCENARIO = Server()
