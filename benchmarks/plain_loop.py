"""The plain loops' shared parts: their options and their timed loop.

Kept apart from the harness on purpose (no dlbench import here): a yardstick
that used dlbench's own loop could not show dlbench's overhead.  Each
plain_bench_*.py builds its model and inputs its own way, then hands one
zero-argument ``step`` to ``timed``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any


def parser(description: str) -> argparse.ArgumentParser:
    """The options every plain loop takes, named as ``dlbench bench`` names them."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--inter-op-threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    return p


def timed(step: Callable[[], Any], batch_size: int, warmup: int, iterations: int) -> dict[str, float]:
    """The first run and ``warmup`` more untimed, then ``iterations`` timed calls; throughput
    is samples over the window's wall time, as the harness computes it."""
    for _ in range(1 + warmup):
        step()
    times = []
    start = time.perf_counter()
    for _ in range(iterations):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    window = time.perf_counter() - start
    return {
        "throughput_sps": iterations * batch_size / window,
        "window_s": window,
        "median_ms": statistics.median(times) * 1000,
    }
