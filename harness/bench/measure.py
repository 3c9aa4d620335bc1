"""The one timed inference loop: warm-up until stable, then a stop rule, raw samples kept.

The clock is injected (``Clock``) so that the loop's logic — when warm-up
ends, when measurement stops, what throughput is — is tested exactly with a
simulated clock, and the real run uses ``time.perf_counter``.

* Warm-up: at least ``warmup`` iterations, and more while the per-iteration
  time is still falling (the median of the latest ``k`` iterations more than
  ``FALLING`` below the median of the ``k`` before), up to ``max_warmup``
  iterations or ``max_warmup_s`` seconds.  Warm-up times are kept and
  reported, never mixed into the statistics.  ``warmup=0`` disables it.
* Stop rule (MLPerf LoadGen style): at least ``min_iterations`` AND at least
  ``min_duration_s`` seconds; or exactly ``iterations`` when fixed.
* Throughput is samples in the measured window over the window's wall time
  (first iteration's start to last iteration's end), not 1 / mean latency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import flag
from dlbench.harness import stats
from dlbench.harness.cells.cpuusage import CpuWindow

FALLING = 0.05  # a warm-up window this much faster than the one before: still warming
RAW_SAMPLES_KEPT = 20000


class Clock:
    """Wall-clock time in seconds and waiting for a moment; the real one by default."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep_until(self, t: float) -> None:
        """Sleep to just before ``t``, then spin: time.sleep alone overshoots by ~0.1 ms."""
        remaining = t - time.perf_counter()
        if remaining > 0.001:
            time.sleep(remaining - 0.0005)
        while time.perf_counter() < t:
            pass


MEASUREMENT = "measurement"


@dataclass
class StopRule:
    warmup: int = flag(
        "--warmup",
        default=5,
        type=int,
        group=MEASUREMENT,
        help="warm-up iterations at least (more while the time still falls; default {default})",
    )
    max_warmup: int = flag(
        "--max-warmup",
        default=100,
        type=int,
        group=MEASUREMENT,
        help="warm-up iterations at most (default {default})",
    )
    max_warmup_s: float = 60.0
    min_iterations: int = flag(
        "--min-iterations", default=10, type=int, group=MEASUREMENT, help="default {default}"
    )
    min_duration_s: float = flag(
        "--min-duration",
        default=2.0,
        type=float,
        group=MEASUREMENT,
        help="seconds measured at least (default {default})",
    )
    iterations: int | None = flag(
        "--iterations",
        default=None,
        type=int,
        group=MEASUREMENT,
        help="measure exactly this many iterations instead",
    )

    def validate(self) -> None:
        for name, value, low in (
            ("--warmup", self.warmup, 0),
            ("--min-iterations", self.min_iterations, 1),
            ("--iterations", self.iterations, 1),
            ("--max-warmup", self.max_warmup, 0),
        ):
            if value is not None and value < low:
                raise UserError(f"{name} must be at least {low}, got {value}")
        if self.min_duration_s < 0:
            raise UserError(f"--min-duration must not be negative, got {self.min_duration_s:g}")
        if self.max_warmup < self.warmup:
            self.max_warmup = self.warmup

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def still_falling(times: list[float], k: int) -> bool:
    if len(times) < 2 * k:
        return True
    recent = stats.median(times[-k:])
    before = stats.median(times[-2 * k : -k])
    return recent < (1 - FALLING) * before


def warm_up(step: Callable[[], Any], rule: StopRule, clock: Clock) -> dict[str, Any]:
    times: list[float] = []
    if rule.warmup == 0:
        return {"iterations": 0, "times_s": [], "total_s": 0.0, "extended": False}
    k = max(2, min(5, rule.warmup // 2))
    start = clock.now()
    while True:
        t0 = clock.now()
        step()
        times.append(clock.now() - t0)
        n = len(times)
        if n < rule.warmup:
            continue
        if n >= rule.max_warmup or clock.now() - start >= rule.max_warmup_s:
            break
        if not still_falling(times, k):
            break
    return {
        "iterations": len(times),
        "times_s": times,
        "total_s": clock.now() - start,
        "extended": len(times) > rule.warmup,
        "stability_window": k,
    }


def measure_loop(
    step: Callable[[], Any],
    rule: StopRule,
    clock: Clock,
    on_iteration: Callable[[int, float], None] | None = None,
) -> tuple[list[float], float]:
    """(per-iteration seconds, window seconds) under ``rule``'s stop condition."""
    times: list[float] = []
    append = times.append
    start = clock.now()
    fixed = rule.iterations
    while True:
        t0 = clock.now()
        step()
        t1 = clock.now()
        append(t1 - t0)
        n = len(times)
        if on_iteration is not None:
            on_iteration(n, t1 - start)
        if fixed:
            if n >= fixed:
                break
        elif n >= rule.min_iterations and t1 - start >= rule.min_duration_s:
            break
    return times, t1 - start


def summarize_latency(times_s: list[float]) -> dict[str, Any]:
    s = stats.summarize(times_s)
    latency = {k: s[k] * 1000 for k in ("mean", "p50", "p90", "p95", "p99", "min", "max", "std")}
    return {
        "latency_ms": latency,
        "cv": s["cv"],
        "iqr_over_median": s["iqr_over_median"],
        "percentile_support": stats.percentile_support(len(times_s)),
    }


def raw_samples_ms(times_s: list[float]) -> dict[str, Any]:
    """Every sample when there are few enough; otherwise every k-th, and k is said."""
    stride = max(1, -(-len(times_s) // RAW_SAMPLES_KEPT))
    return {
        "latency_samples_ms": [round(t * 1000, 6) for t in times_s[::stride]],
        "latency_samples_stride": stride,
    }


def measure(
    step: Callable[[], Any],
    batch_size: int,
    rule: StopRule,
    clock: Clock,
    on_iteration: Callable[[int, float], None] | None = None,
    after_warmup: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Warm up, measure, and return the cell's statistics (latencies in ms)."""
    warm = warm_up(step, rule, clock)
    if after_warmup is not None:
        after_warmup()
    with CpuWindow() as cpu:  # kernel share and page faults of the measured window only
        times, window = measure_loop(step, rule, clock, on_iteration)
    n = len(times)
    out = {
        "throughput_sps": stats.window_throughput(n * batch_size, window),
        "window_s": window,
        "iterations": n,
        "samples": n * batch_size,
        **summarize_latency(times),
        **raw_samples_ms(times),
        **cpu.report(n),
        "warmup_iterations": warm["iterations"],
        "warmup": {
            "times_ms": [t * 1000 for t in warm["times_s"]],
            "total_s": warm["total_s"],
            "extended_until_stable": warm["extended"],
            "first_ms": warm["times_s"][0] * 1000 if warm["times_s"] else None,
        },
    }
    return out
