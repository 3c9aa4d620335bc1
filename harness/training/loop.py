"""The one timed training loop every framework goes through.

The clock lives here, not in the framework sessions: warm-up steps (graph
construction, first allocations) are timed and reported apart, and the
measured window's throughput is samples over the window's wall time, not
1 / mean step time.

Real data sets are read per step: before each step the loop pulls the next
batch from the reader and hands it to the session (``put``: onto the device).
That time is the step's *data time*, measured apart and excluded from the
compute window, so ``throughput_sps`` stays comparable with synthetic runs
and ``throughput_with_data_sps`` shows what the reader costs.  Loading is
synchronous, in the training thread, with no prefetching: a reader that
cannot keep up shows as data time instead of being hidden behind a queue.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.harness import stats
from dlbench.harness.cells.cpuusage import CpuWindow
from dlbench.harness.training import user
from dlbench.harness.training.base import TrainConfig, TrainSession
from dlbench.harness.training.data import start
from dlbench.models.registry import ModelSpec, get_model


def session_class(framework: str) -> type[TrainSession]:
    return importlib.import_module(f"dlbench.harness.training.{framework}").Session


def _summary(samples: list[float]) -> dict[str, float]:
    s = stats.summarize(samples)
    return {"mean": s["mean"], "p50": s["p50"], "p90": s["p90"], "total": sum(samples)}


def run(cfg: TrainConfig, out_dir: Path, spec: ModelSpec | None = None, rank: int = 0) -> dict[str, Any]:
    """Train per ``cfg``, save the checkpoint into ``out_dir``, return the metrics.
    ``spec``: a user's model's (``harness.training.user``); default the zoo's ``cfg.model``.
    ``rank``: in a data-parallel cell each rank trains on its own data (seeded apart); the
    model's seed stays the same, so every rank starts from the same weights."""
    spec = spec or get_model(cfg.model)
    cls = session_class(cfg.framework)
    t0 = time.perf_counter()
    dataset, batches, stream = start(
        spec, cfg.data, cfg.batch_size, cfg.warmup_steps + cfg.steps, cfg.seed + rank, cls.layout
    )
    if cfg.eval:
        dataset.require_eval()
    data_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    session = cls(spec, cfg, batches)
    setup_s = time.perf_counter() - t0
    del batches

    def feed(i: int) -> float:
        if stream is None:
            return 0.0
        t = time.perf_counter()
        session.put(i, next(stream))
        return time.perf_counter() - t

    warm_times, warm_losses, warm_data = [], [], []
    for i in range(cfg.warmup_steps):
        warm_data.append(feed(i))
        t0 = time.perf_counter()
        warm_losses.append(session.step(i))
        warm_times.append(time.perf_counter() - t0)

    times, losses, data_times = [], [], []
    cpu = CpuWindow()  # around each measured step only: data reading is not the step's
    if cfg.distributed:
        session.all_gather(np.zeros(1))  # a barrier: the window opens on every rank at once
    epoch_start = time.time()
    loop_start = time.perf_counter()
    for i in range(cfg.warmup_steps, cfg.warmup_steps + cfg.steps):
        data_times.append(feed(i))
        cpu.begin()
        t0 = time.perf_counter()
        losses.append(session.step(i))
        times.append(time.perf_counter() - t0)
        cpu.end()
    wall_s = time.perf_counter() - loop_start
    epoch_end = time.time()
    window_s = wall_s - sum(data_times)

    checkpoint = None
    if session.rank == 0:  # data-parallel ranks hold the same weights
        checkpoint = user.save(session, out_dir) if user.is_user(spec) else session.save(out_dir)
    summary = stats.summarize(times)
    all_losses = warm_losses + losses
    samples = cfg.steps * cfg.batch_size
    metrics = {
        "throughput_sps": samples / window_s,
        "throughput_with_data_sps": samples / wall_s,
        "window_s": window_s,
        "step_time_s": {k: summary[k] for k in ("mean", "p50", "p90", "min", "max", "std")},
        "step_time_cv": summary["cv"],
        "step_times_s": times,
        "data_time_s": data_times,
        "data_time": _summary(data_times),
        "warmup_steps": cfg.warmup_steps,
        "warmup_times_s": warm_times,
        "warmup_total_s": sum(warm_times),
        "warmup_data_time_s": warm_data,
        "data_prep_s": data_s,
        "setup_s": setup_s,
        "loss_start": all_losses[0],
        "loss_end": all_losses[-1],
        "losses": all_losses,
        "checkpoint": checkpoint,
        "framework_version": cls.version(),
        "layout": "the model's own" if user.is_user(spec) else cls.layout,
        "runtime": session.runtime(),
        **cpu.report(cfg.steps),
    }
    if cfg.distributed:
        from dlbench.harness.training.gather import combine

        metrics.update(combine(session, metrics, epoch_start, epoch_end))
    if cfg.eval:
        metrics["eval"] = evaluate(session, dataset, cfg, cls.layout)
    metrics["data"] = dataset.describe()
    return metrics


def evaluate(session: TrainSession, dataset, cfg: TrainConfig, layout: str) -> dict[str, Any]:
    """Held-out loss and top-1 accuracy, after training (reading the split included
    in ``time_s``; none of it in the training figures)."""
    t0 = time.perf_counter()
    score = session.evaluate(dataset.eval_batches(cfg.batch_size, layout, cfg.eval_samples))
    return {**score, "split": dataset.eval_split, "time_s": time.perf_counter() - t0}
