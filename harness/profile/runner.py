"""``dlbench profile``'s request and its one record: the parent's side of the profile cell."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import flag
from dlbench.harness.backends.onnxruntime import LEVELS
from dlbench.harness.bench.input_args import InputFields
from dlbench.harness.store.context import CommandOptions


@dataclass(kw_only=True)
class ProfileRequest(InputFields, CommandOptions):
    """Each field a flag sets declares it (``core.flags``)."""

    artifact: str = flag(
        "artifact",
        metavar="MODEL",
        help="an ONNX file, or a model 'dlbench run' exports (export it first: dlbench export MODEL)",
    )
    batch_size: int = flag("--batch-size", default=1, type=int, help="batch size (default {default})")
    warmup: int = flag("--warmup", default=10, type=int, help="runs before profiling (default {default})")
    iterations: int = flag("--iterations", default=50, type=int, help="profiled runs (default {default})")
    graph_optimization: str = flag(
        "--graph-optimization",
        default="all",
        choices=LEVELS,
        help="ONNX Runtime's graph optimization level, as bench's (default {default})",
    )
    # False: the caller reads the profile and stores nothing (the advisor's own profiles).
    store: bool = True


def profile(req: ProfileRequest) -> dict[str, Any]:
    """Profile ``req.artifact`` in one cell; return its stored ``profile`` record."""
    from dlbench.core.atomic import write_json
    from dlbench.harness.backends import get_backend
    from dlbench.harness.backends.base import RunConfig
    from dlbench.harness.bench import flops
    from dlbench.harness.bench import inputs as inputs_mod
    from dlbench.harness.bench.artifacts import resolve
    from dlbench.harness.cells.cellenv import cell_environment
    from dlbench.harness.cells.launcher import run_cell
    from dlbench.harness.cells.threads import ThreadConfig
    from dlbench.harness.formats import ONNX
    from dlbench.harness.profile.child import BACKEND, ProfilePayload
    from dlbench.harness.store import records
    from dlbench.harness.store.context import new_run_id, now_iso

    for name, value in (("--batch-size", req.batch_size), ("--iterations", req.iterations)):
        if value < 1:
            raise UserError(f"{name} {value}: give at least 1")
    if req.warmup < 0:
        raise UserError(f"--warmup {req.warmup}: give 0 or more")
    art = resolve(req.artifact, shapes=req.shapes, inputs=req.inputs, timeout=req.timeout)
    if art.format != ONNX:
        raise UserError(
            f"{art.label}: dlbench profile reads ONNX files (ONNX Runtime's profiler); "
            f"export it first (dlbench export {req.artifact})"
        )
    shapes = art.shapes_for(req.shapes, {})
    plan = inputs_mod.plan(art.signature, req.batch_size, shapes, req.int_ranges, art.graph_ranges, {})
    at = {i.name: i.shape for i in plan.inputs}
    by_type = flops.by_op_type(art.onnx_model, at)
    threads = ThreadConfig.default(req.threads)
    backend = get_backend(BACKEND)
    precision = art.own_precision or "fp32"
    options = backend.resolve_options({"graph_optimization": req.graph_optimization})
    run = RunConfig("cpu", precision, threads.intra_op, threads.inter_op, options=options)
    env = cell_environment(
        threads,
        extra={
            **backend.environment(options, threads.intra_op, threads.inter_op),
            **backend.math_environment("cpu", precision, options),
        },
    )
    identity = {
        "artifact": {k: v for k, v in art.identity().items() if k != "path"},
        "backend": BACKEND,
        "batch_size": req.batch_size,
        "shapes": {k: list(v) for k, v in at.items()},
        "threads": [threads.intra_op, threads.inter_op],
        "options": options,
        "iterations": req.iterations,
    }
    record = records.new_record(
        "profile", run_id=new_run_id(), identity=identity, started=now_iso(), argv=req.argv, env=env
    )
    record.update(
        {
            "model": art.ref.model,
            "framework": art.ref.framework,
            "backend": BACKEND,
            "precision": art.own_precision,
            "batch_size": req.batch_size,
            "intra_op_threads": threads.intra_op,
            "inter_op_threads": threads.inter_op,
        }
    )
    record["context"]["artifact"] = {**art.identity(), "label": art.label}
    record["context"]["options"] = options
    payload = ProfilePayload(
        art.ref,
        run,
        [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in art.signature or []],
        req.batch_size,
        {k: list(v) for k, v in shapes.items()},
        {k: list(v) for k, v in req.int_ranges.items()},
        {k: list(v) for k, v in art.graph_ranges.items()},
        req.warmup,
        req.iterations,
    )
    start = time.perf_counter()
    outcome = run_cell("profile", payload.to_json(), env=env, timeout=req.timeout)
    if outcome.status == "usage_error":
        raise UserError(outcome.error)
    record["duration_s"] = time.perf_counter() - start
    if outcome.ok:
        result = outcome.result
        record["status"] = "ok"
        record["backend_version"] = result["backend_version"]
        record["metrics"]["profile"] = summarize(result, by_type, req.batch_size)
        record["context"].update({"inputs": result["inputs"], "runtime": result["runtime"]})
    else:
        record["error"] = outcome.error
        record["context"].update({"traceback": outcome.traceback, "log_tail": outcome.log_tail})
    if req.store:
        records.store(req.db, record, None)
    if req.json_path:
        write_json(req.json_path, [record])
    return record


TOP_NODES = 40


def summarize(result: dict[str, Any], by_type: dict[str, dict[str, float]], batch: int) -> dict[str, Any]:
    """Node times per class beside the class's FLOPs on the source graph; the slowest nodes."""
    from dlbench.harness.profile.classes import op_class

    nodes = result["nodes"]
    total_us = sum(n["us"] for n in nodes) or 1.0
    classes: dict[str, dict[str, Any]] = {}
    op_types: dict[str, float] = {}
    for n in nodes:
        row = classes.setdefault(op_class(n["op"]), {"us": 0.0, "nodes": 0, "ops": set()})
        row["us"] += n["us"]
        row["nodes"] += 1
        row["ops"].add(n["op"])
        op_types[n["op"]] = op_types.get(n["op"], 0.0) + n["us"] / total_us
    work: dict[str, float] = {}
    for op, w in by_type.items():
        work[op_class(op)] = work.get(op_class(op), 0.0) + 2 * w["macs"] + w["other"]
    out = []
    for cls, row in sorted(classes.items(), key=lambda kv: -kv[1]["us"]):
        gflop = work.get(cls, 0.0) / 1e9
        out.append(
            {
                "class": cls,
                "share": row["us"] / total_us,
                "ms_per_run": row["us"] / 1000,
                "nodes": row["nodes"],
                "ops": sorted(row["ops"]),
                "gflop_per_run": gflop,
                "gflops": gflop / (row["us"] / 1e6) if gflop and row["us"] else None,
            }
        )
    return {
        "wall_ms_per_run": result["wall_ms_per_run"],
        "node_ms_per_run": total_us / 1000,
        "classes": out,
        "op_types": dict(sorted(op_types.items(), key=lambda kv: -kv[1])),  # share of node time, all nodes
        "nodes": [{**n, "class": op_class(n["op"]), "share": n["us"] / total_us} for n in nodes[:TOP_NODES]],
        "node_count": len(nodes),
        "optimized_nodes": result["optimized_nodes"],
        "batch_size": batch,
        "flops_source": "the source graph at the profiled shapes, by op class",
    }
