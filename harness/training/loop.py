"""The one timed training loop every framework goes through.

The clock lives here, not in the framework sessions: warm-up steps (graph
construction, first allocations) are timed and reported apart, and the
measured window's throughput is samples over the window's wall time, not
1 / mean step time.
"""
from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

from harness import stats
from harness.training.base import TrainConfig, TrainSession
from harness.training.data import load_batches
from models.registry import get_model


def session_class(framework: str) -> type[TrainSession]:
    return importlib.import_module(f"harness.training.{framework}").Session


def run(cfg: TrainConfig, out_dir: Path) -> dict[str, Any]:
    """Train per ``cfg``, save the checkpoint into ``out_dir``, return the metrics."""
    spec = get_model(cfg.model)
    cls = session_class(cfg.framework)
    t0 = time.perf_counter()
    batches = load_batches(spec, cfg.data, cfg.batch_size, cfg.warmup_steps + cfg.steps,
                           cfg.seed, cls.layout)
    data_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    session = cls(spec, cfg, batches)
    setup_s = time.perf_counter() - t0
    del batches

    warm_times, warm_losses = [], []
    for i in range(cfg.warmup_steps):
        t0 = time.perf_counter()
        warm_losses.append(session.step(i))
        warm_times.append(time.perf_counter() - t0)

    times, losses = [], []
    window_start = time.perf_counter()
    for i in range(cfg.warmup_steps, cfg.warmup_steps + cfg.steps):
        t0 = time.perf_counter()
        losses.append(session.step(i))
        times.append(time.perf_counter() - t0)
    window_s = time.perf_counter() - window_start

    checkpoint = session.save(out_dir)
    summary = stats.summarize(times)
    all_losses = warm_losses + losses
    return {
        "throughput_sps": cfg.steps * cfg.batch_size / window_s,
        "window_s": window_s,
        "step_time_s": {k: summary[k] for k in ("mean", "p50", "p90", "min", "max", "std")},
        "step_time_cv": summary["cv"],
        "step_times_s": times,
        "warmup_steps": cfg.warmup_steps,
        "warmup_times_s": warm_times,
        "warmup_total_s": sum(warm_times),
        "data_prep_s": data_s,
        "setup_s": setup_s,
        "loss_start": all_losses[0],
        "loss_end": all_losses[-1],
        "losses": all_losses,
        "checkpoint": checkpoint,
        "framework_version": cls.version(),
        "layout": cls.layout,
        "runtime": session.runtime(),
    }
