"""The measurement loop's arithmetic and rules, on a simulated clock (exact, not timed)."""

import math

import pytest

from dlbench.core.errors import UserError
from dlbench.harness import stats
from dlbench.harness.bench.measure import StopRule, measure, measure_loop, warm_up


class FakeClock:
    """Time advances only when the fake work says so."""

    def __init__(self):
        self.t = 100.0

    def now(self):
        return self.t

    def sleep_until(self, t):
        self.t = max(self.t, t)


def stepper(clock, durations):
    """A step that takes durations[i] seconds on its i-th call (the last one repeats)."""
    calls = {"n": 0}

    def step():
        i = calls["n"]
        calls["n"] += 1
        clock.t += durations[min(i, len(durations) - 1)]

    return step, calls


def test_throughput_is_samples_over_window_and_percentiles_are_hand_computed():
    clock = FakeClock()
    # warm-up: 2 iterations of 0.1 s; measured: 0.01, 0.02, 0.03, 0.04, 0.10 s
    step, _ = stepper(clock, [0.1, 0.1, 0.01, 0.02, 0.03, 0.04, 0.10])
    rule = StopRule(warmup=2, max_warmup=2, iterations=5)
    m = measure(step, batch_size=8, rule=rule, clock=clock)
    assert m["iterations"] == 5 and m["warmup_iterations"] == 2
    assert m["window_s"] == pytest.approx(0.20)
    assert m["throughput_sps"] == pytest.approx(5 * 8 / 0.20)  # 200, not 8 / mean
    lat = m["latency_ms"]
    assert lat["mean"] == pytest.approx(40.0)
    assert lat["p50"] == pytest.approx(30.0)
    # sorted 10 20 30 40 100: p90 at rank 3.6 -> 40 + 0.6 * 60
    assert lat["p90"] == pytest.approx(76.0)
    assert lat["p95"] == pytest.approx(88.0)
    assert lat["p99"] == pytest.approx(97.6)
    assert lat["min"] == pytest.approx(10.0) and lat["max"] == pytest.approx(100.0)
    std = math.sqrt(sum((x - 40) ** 2 for x in (10, 20, 30, 40, 100)) / 4)
    assert lat["std"] == pytest.approx(std)
    assert m["cv"] == pytest.approx(std / 40)
    assert m["latency_samples_ms"] == pytest.approx([10, 20, 30, 40, 100])
    assert m["warmup"]["times_ms"] == pytest.approx([100, 100])


def test_window_counts_time_between_iterations():
    """Host work between steps lowers throughput; it is not hidden by 1/mean latency."""
    clock = FakeClock()
    step, _ = stepper(clock, [0.01])

    def host_work(n, elapsed):
        clock.t += 0.01

    m = measure(step, 1, StopRule(warmup=0, iterations=10), clock, on_iteration=host_work)
    assert m["latency_ms"]["mean"] == pytest.approx(10.0)
    # the window ends when the last step ends: 10 steps + 9 gaps = 0.19 s
    assert m["window_s"] == pytest.approx(0.19)
    assert m["throughput_sps"] == pytest.approx(10 / 0.19)  # not 1 / 10 ms = 100


def test_stop_rule_needs_both_iterations_and_duration():
    clock = FakeClock()
    step, _ = stepper(clock, [0.01])
    times, window = measure_loop(step, StopRule(min_iterations=10, min_duration_s=0.5), clock)
    assert len(times) == 50 and window == pytest.approx(0.5)  # duration binds
    clock = FakeClock()
    step, _ = stepper(clock, [0.2])
    times, window = measure_loop(step, StopRule(min_iterations=10, min_duration_s=0.5), clock)
    assert len(times) == 10 and window == pytest.approx(2.0)  # iterations bind
    clock = FakeClock()
    step, _ = stepper(clock, [0.2])
    times, _ = measure_loop(step, StopRule(iterations=3, min_iterations=10, min_duration_s=9), clock)
    assert len(times) == 3  # fixed count wins


def test_warm_up_continues_while_time_still_falls():
    clock = FakeClock()
    falling = [1.0 * 0.8**i for i in range(20)] + [0.0115]  # then flat
    step, calls = stepper(clock, falling)
    warm = warm_up(step, StopRule(warmup=5, max_warmup=100), clock)
    assert warm["extended"] and 20 <= warm["iterations"] <= 26
    clock = FakeClock()
    step, _ = stepper(clock, [0.05])
    flat = warm_up(step, StopRule(warmup=5, max_warmup=100), clock)
    assert flat["iterations"] == 5 and not flat["extended"]


def test_warm_up_is_capped_and_can_be_off():
    clock = FakeClock()
    step, _ = stepper(clock, [1.0 * 0.5**i for i in range(60)])
    assert warm_up(step, StopRule(warmup=5, max_warmup=12), clock)["iterations"] == 12
    step, calls = stepper(clock, [0.1])
    assert warm_up(step, StopRule(warmup=0), clock)["iterations"] == 0 and calls["n"] == 0


def test_stop_rule_validation():
    for kwargs, msg in (
        ({"min_iterations": 0}, "--min-iterations must be at least 1"),
        ({"iterations": 0}, "--iterations must be at least 1"),
        ({"warmup": -1}, "--warmup must be at least 0"),
        ({"min_duration_s": -1}, "--min-duration must not be negative"),
    ):
        with pytest.raises(UserError, match=msg):
            StopRule(**kwargs).validate()


def test_repeat_spread_and_percentile_support():
    xs = [100.0, 102.0, 98.0, 101.0, 130.0]
    assert stats.median(xs) == 101.0
    # deviations 1 1 3 0 29 -> median 1
    assert stats.mad(xs) == 1.0
    assert stats.relative_mad(xs) == pytest.approx(1 / 101)
    assert stats.min_samples_for(90) == 66 and stats.min_samples_for(99) == 688
    assert stats.percentile_support(100) == {"p50": True, "p90": True, "p95": False, "p99": False}
    assert stats.window_throughput(64, 2.0) == 32.0
