"""The profile cell: ONNX Runtime's profiler over the measured runs, node times per run.

The session is the ONNX Runtime backend's own runner (``OrtRunner``, its options, threads
and math mode as ``bench`` sets them), with profiling switched on.  The profiler records
from the session's creation, so the warm-up runs are in its trace too; they are dropped by
time: only node events inside the measured runs' ``model_run`` windows count.  Each
node's kernel time is summed over those runs and divided by their number.  The graph
ONNX Runtime optimized is saved beside the trace and read for each node's op type (a
fused node's name is the runtime's, not the source graph's).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from dlbench.core.atomic import scratch
from dlbench.harness.backends import get_backend
from dlbench.harness.backends.base import ArtifactRef, RunConfig, TensorInfo
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.cells.payload import Payload

BACKEND = "onnxruntime"


@dataclass
class ProfilePayload(Payload):
    WHAT = "profile"
    VERSION = 2

    artifact: ArtifactRef
    run: RunConfig
    signature: list[dict[str, Any]]
    batch_size: int
    shapes: dict[str, list[int]]
    int_ranges: dict[str, list[int]]
    graph_ranges: dict[str, list[int]]
    warmup: int
    iterations: int


def run(message: dict[str, Any]) -> dict[str, Any]:
    import onnx

    p = ProfilePayload.from_json(message)
    signature = [TensorInfo(s["name"], s["dtype"], tuple(s["shape"])) for s in p.signature]
    shapes = {k: tuple(v) for k, v in p.shapes.items()}
    int_ranges = {k: (int(v[0]), int(v[1])) for k, v in p.int_ranges.items()}
    ranges = {k: (int(v[0]), int(v[1])) for k, v in p.graph_ranges.items()}
    plan = inputs_mod.plan(signature, p.batch_size, shapes, int_ranges, ranges, {})
    backend = get_backend(BACKEND)
    with scratch("dlbench-profile") as tmp:
        runner = backend.runner(p.artifact, p.run)
        runner.profile_dir = tmp
        runner.load()
        handle = runner.prepare(inputs_mod.synthesize(plan, 0))
        for _ in range(p.warmup):
            runner.run(handle)
        runner.sync()
        t0 = time.perf_counter()
        for _ in range(p.iterations):
            runner.run(handle)
        runner.sync()
        wall_ms = (time.perf_counter() - t0) * 1000 / p.iterations
        with open(runner.session.end_profiling()) as fh:
            events = json.load(fh)
        optimized = onnx.load(os.path.join(tmp, "optimized.onnx"), load_external_data=False)
    types = {n.name: n.op_type for n in optimized.graph.node}
    nodes = node_times(events, p.warmup, p.iterations)
    for n in nodes:
        n["op"] = n.get("op") or types.get(n["node"], "?")
    return {
        "backend_version": backend.version(),
        "runtime": runner.runtime(),
        "wall_ms_per_run": wall_ms,
        "nodes": nodes,
        "optimized_nodes": len(optimized.graph.node),
        "inputs": plan.describe(),
    }


def node_times(events: list[dict[str, Any]], warmup: int, iterations: int) -> list[dict[str, Any]]:
    """Each node's kernel time per measured run (µs), its op type and provider, slowest
    first; the warm-up runs' events (the first ``warmup`` model_run windows) left out."""
    runs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    measured = runs[warmup : warmup + iterations]
    if not measured:
        return []
    start = measured[0][0]
    totals: dict[str, dict[str, Any]] = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "Node" or not name.endswith("_kernel_time") or e.get("ts", 0) < start:
            continue
        node = name[: -len("_kernel_time")]
        args = e.get("args") or {}
        row = totals.setdefault(
            node, {"node": node, "op": args.get("op_name"), "provider": args.get("provider"), "us": 0.0}
        )
        row["us"] += e.get("dur", 0)
    for row in totals.values():
        row["us"] /= len(measured)
    return sorted(totals.values(), key=lambda r: -r["us"])
