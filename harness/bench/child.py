"""One benchmark cell, inside its own process (the ``bench`` kind of harness.cells.cell).

Order of work, so that only the measured loop is timed as steady state:
load the model (cold start: ``load_s``), make and place the inputs
(``prepare_s``), run one batch alone (``first_inference_ms``: the first run
is often hundreds of times slower than the rest and users meet it), then the
scenario's warm-up and measurement.  Afterwards the runner reports what
actually ran, and a silent fallback fails the cell.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from dlbench.core.tensors import fixed_batch
from dlbench.harness import stats
from dlbench.harness.backends import get_backend
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.bench.measure import Clock
from dlbench.harness.bench.payload import CellPayload
from dlbench.harness.bench.scenarios import ScenarioContext, get_scenario
from dlbench.harness.cells import stage
from dlbench.harness.cells.envs import imported_packages

PROGRESS_EVERY_S = 0.5


class ProgressWriter:
    """Tells the parent how the cell is going: a small JSON file, replaced atomically."""

    def __init__(self, path: str | None):
        self.path, self.last, self.phase = path, 0.0, "start"
        self.write(phase="start")

    def write(self, **fields: Any) -> None:
        if not self.path:
            return
        fields.setdefault("phase", self.phase)
        self.phase = fields["phase"]
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"pid": os.getpid(), **fields}, fh)
        os.replace(tmp, self.path)

    def step(self, phase: str, doing: str) -> None:
        """A new phase, for two readers: the live bar's word for it (``phase``) and, should
        the cell die in it, the failure line's "while <doing>" (``stage``)."""
        self.write(phase=phase)
        stage.enter(doing)

    def iteration(self, phase: str, n: int, elapsed: float, samples: int) -> None:
        now = time.perf_counter()
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        self.write(
            phase=phase,
            iterations=n,
            elapsed_s=elapsed,
            throughput_sps=samples / elapsed if elapsed > 0 else None,
        )


def run(message: dict[str, Any]) -> dict[str, Any]:
    payload = CellPayload.from_json(message)
    progress = ProgressWriter(payload.progress_path)
    backend = get_backend(payload.backend)
    cfg = payload.run
    runner = backend.runner(payload.artifact, cfg)

    progress.step("loading", f"loading the model on {payload.backend}")
    t0 = time.perf_counter()
    runner.load()
    load_s = time.perf_counter() - t0

    # The parent's reading of the graph (dynamic dims by name) wins over the engine's.
    signature = payload.signature or runner.inputs()
    shapes, int_ranges, graph_ranges = payload.shapes, payload.int_ranges, payload.graph_ranges
    given = payload.given  # --input: values and files (path, sha256)
    seed = payload.seed
    handles: dict[int, Any] = {}
    plans: dict[int, inputs_mod.InputPlan] = {}
    prepare_s: dict[int, float] = {}

    def prepared(batch: int) -> Any:
        if batch not in handles:
            p = inputs_mod.plan(signature, batch, shapes, int_ranges, graph_ranges, given)
            feeds = inputs_mod.synthesize(p, seed)
            t = time.perf_counter()
            handles[batch] = runner.prepare(feeds)
            prepare_s[batch] = time.perf_counter() - t
            plans[batch] = p
        return handles[batch]

    batch = payload.batch_size
    first_plan = inputs_mod.plan(signature, batch, shapes, int_ranges, graph_ranges, given)
    batch = first_plan.batch_size  # a fixed-batch model runs its own batch
    progress.step("preparing inputs", f"preparing the inputs (batch size {batch})")
    step_handle = prepared(batch)
    progress.step("first inference", f"running the first batch (batch size {batch})")
    t0 = time.perf_counter()
    runner.run(step_handle)
    runner.sync()
    first_ms = (time.perf_counter() - t0) * 1000

    scenario = get_scenario(payload.scenario)
    ctx = ScenarioContext(
        runner=runner,
        batch_size=batch,
        prepared=prepared,
        rule=payload.rule,
        clock=Clock(),
        params=dict(payload.scenario_params, fixed_batch=fixed_batch(signature) is not None),
        on_iteration=progress.iteration,
        seed=seed,
    )
    progress.step("warm-up", f"warming up and measuring ({payload.scenario} scenario)")
    metrics = scenario.run(ctx)
    progress.step("checking", "asking the engine what ran")

    runtime = runner.runtime()
    runner.verify(runtime)
    device_times = {k: _summary_ms(v) for k, v in runner.device_times().items() if v}
    device_memory, memory_source = runner.device_memory_mb(), "backend"
    if device_memory is None and cfg.device == "cuda":
        device_memory, memory_source = _nvidia_smi_used_mb(os.getpid()), "nvidia-smi at the end"
    steady = (metrics.get("latency_ms") or {}).get("p50")
    metrics.update(
        {
            "batch_size": batch,
            "cold_start": {
                "load_s": load_s,
                "prepare_s": prepare_s.get(batch),
                "first_inference_ms": first_ms,
                "first_over_steady": first_ms / steady if steady else None,
            },
            "device_times_ms": device_times,
            "device_memory_mb": device_memory,
            "device_memory_source": memory_source if device_memory is not None else None,
        }
    )
    return {
        "metrics": metrics,
        "runtime": runtime,
        "timed_region": runner.timed_region(),
        "inputs": first_plan.describe(),
        "notes": first_plan.notes,
        "backend_version": backend.version(),
        # Under --with, the whole environment the cell imported from.
        "packages": imported_packages() if payload.packages else None,
    }


def _summary_ms(values: list[float]) -> dict[str, float]:
    s = stats.summarize(values)
    return {k: s[k] for k in ("mean", "p50", "p90", "p99", "min", "max")}


def _nvidia_smi_used_mb(pid: int) -> float | None:
    """This process's GPU memory as nvidia-smi sees it (engines without their own counter)."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            try:
                return float(parts[1])
            except ValueError:
                return None
    return None
