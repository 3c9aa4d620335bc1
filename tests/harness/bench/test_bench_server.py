"""The server scenario on a service with a known time, under a simulated clock (exact).

Poisson arrivals, the batcher and the QPS search are checked against what
queueing arithmetic says: no rate above capacity can meet a bound, a light
load's latency is the service time, batching raises capacity.  A real ONNX
Runtime smoke of the same scenario is in test_bench_sweep.py.
"""

import pytest

from dlbench.harness.backends.base import Runner
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.scenarios import ScenarioContext, get_scenario
from dlbench.harness.bench.scenarios.server import buckets_for


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    def sleep_until(self, t):
        self.t = max(self.t, t)


class KnownService(Runner):
    """A batch of any size takes ``base + per_sample * bucket`` seconds of simulated time."""

    def __init__(self, clock, base, per_sample=0.0):
        self.clock, self.base, self.per_sample = clock, base, per_sample
        self.batches = []

    def load(self):
        pass

    def inputs(self):
        return []

    def prepare(self, feeds):
        return feeds

    def run(self, bucket):
        self.batches.append(bucket)
        self.clock.t += self.base + self.per_sample * bucket

    def timed_region(self):
        return {}

    def runtime(self):
        return {}


def _ctx(max_batch, base, per_sample=0.0, **params):
    clock = FakeClock()
    runner = KnownService(clock, base, per_sample)
    rule = StopRule(warmup=2, max_warmup=2, min_iterations=200, min_duration_s=4.0)
    ctx = ScenarioContext(
        runner=runner,
        batch_size=max_batch,
        prepared=lambda b: b,
        rule=rule,
        clock=clock,
        params=params,
        seed=3,
    )
    return ctx, runner


def test_buckets():
    assert buckets_for(1) == [1]
    assert buckets_for(8) == [1, 2, 4, 8]
    assert buckets_for(6) == [1, 2, 4, 6]


def test_light_load_latency_is_the_service_time():
    ctx, runner = _ctx(max_batch=1, base=0.010, qps=[5.0])
    out = get_scenario("server").run(ctx)
    [point] = out["server"]["points"]
    assert point["latency_ms"]["min"] == pytest.approx(10.0)
    assert point["latency_ms"]["p50"] == pytest.approx(10.0)  # at 5% load, rarely a queue
    assert point["mean_batch"] == 1.0
    assert point["achieved_qps"] == pytest.approx(5.0, rel=0.25)
    assert out["server"]["estimated_capacity_qps"] == pytest.approx(100.0)


def test_qps_search_finds_the_highest_rate_within_the_bound():
    ctx, _ = _ctx(max_batch=1, base=0.010, latency_bound_ms=50.0)
    out = get_scenario("server").run(ctx)
    s = out["server"]
    found = s["found_qps"]
    # An M/D/1 queue with 10 ms service keeps p99 under 50 ms up to roughly 70 % load.
    assert 40.0 < found < 100.0
    assert out["latency_ms"]["p99"] <= 50.0
    meeting = [p["target_qps"] for p in s["points"] if p["meets_bound"]]
    failing = [p["target_qps"] for p in s["points"] if not p["meets_bound"]]
    assert found == max(meeting)
    assert failing and min(failing) > found  # every rate tried above it broke the bound
    assert all(p["target_qps"] <= 110.0 for p in s["points"])
    assert out["throughput_sps"] == pytest.approx(found, rel=0.2)


def test_batching_raises_capacity_under_the_same_bound():
    """4 ms per batch regardless of size: batching up to 8 carries far more load."""
    single, _ = _ctx(max_batch=1, base=0.004, latency_bound_ms=40.0, max_wait_ms=2.0)
    batched, runner = _ctx(max_batch=8, base=0.004, latency_bound_ms=40.0, max_wait_ms=2.0)
    one = get_scenario("server").run(single)["server"]["found_qps"]
    many = get_scenario("server").run(batched)
    assert many["server"]["found_qps"] > 2 * one
    best = next(p for p in many["server"]["points"] if p["target_qps"] == many["server"]["found_qps"])
    assert best["mean_batch"] > 1.5
    assert set(runner.batches) <= {1, 2, 4, 8}  # buckets only


def test_an_unreachable_bound_is_reported_not_faked():
    ctx, _ = _ctx(max_batch=1, base=0.020, latency_bound_ms=10.0)
    out = get_scenario("server").run(ctx)
    assert out["server"]["found_qps"] is None and out["throughput_sps"] == 0.0
    assert "no rate met p99 <= 10 ms" in out["no_feasible_rate"]


def test_seeded_arrivals_repeat_exactly():
    a = get_scenario("server").run(_ctx(max_batch=2, base=0.005, qps=[150.0])[0])
    b = get_scenario("server").run(_ctx(max_batch=2, base=0.005, qps=[150.0])[0])
    assert a["server"]["points"] == b["server"]["points"]
