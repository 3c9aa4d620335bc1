"""ONNX Runtime's side of the profile cell: its profiler's node events, per measured run.

The session is the ONNX Runtime backend's own runner (``OrtRunner``), with profiling
switched on.  The profiler records from the session's creation, so the warm-up runs are
in its trace too; they are dropped by time: only node events inside the measured runs'
``model_run`` windows count.  Each node's kernel time is summed over those runs and
divided by their number.  The graph ONNX Runtime optimized is saved beside the trace and
read for each node's op type (a fused node's name is the runtime's, not the source
graph's).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from dlbench.harness.profile.child import timed_runs


def profile_runs(runner, feeds: dict[str, Any], warmup: int, iterations: int, tmp: str) -> dict[str, Any]:
    import onnx

    runner.profile_dir = tmp
    runner.load()
    handle = runner.prepare(feeds)
    wall_ms = timed_runs(runner, handle, warmup, iterations)
    with open(runner.session.end_profiling()) as fh:
        events = json.load(fh)
    optimized = onnx.load(os.path.join(tmp, "optimized.onnx"), load_external_data=False)
    graph = {n.name: n for n in optimized.graph.node}
    nodes = node_times(events, warmup, iterations)
    for n in nodes:
        found = graph.get(n["node"])
        n["op"] = n.get("op") or (found.op_type if found is not None else "?")
        if found is not None and found.attribute:
            n["attrs"] = _attributes(found)
    return {"wall_ms_per_run": wall_ms, "nodes": nodes, "optimized_nodes": len(optimized.graph.node)}


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
        row = totals.get(node)
        if row is None:
            op, provider = args.get("op_name"), args.get("provider")
            row = totals[node] = {"node": node, "op": op, "provider": provider, "us": 0.0}
            row["at"] = len(totals) - 1  # its place in the run: the order nodes ran in
            moved = traced_bytes(args)
            if moved is not None:
                row["bytes"] = moved
            for key, field in (("input_type_shape", "inputs"), ("output_type_shape", "outputs")):
                if args.get(key):  # [[dtype, shape], ...]: what the op ran on
                    row[field] = [[*t.items()][0] for t in args[key] if len(t) == 1]
        row["us"] += e.get("dur", 0)
    for row in totals.values():
        row["us"] /= len(measured)
    return sorted(totals.values(), key=lambda r: -r["us"])


def _attributes(node) -> dict[str, Any]:
    """A node's scalar and list attributes (kernel, strides, group, fused activation):
    what, beside its shapes, says which kernel ran; tensors and graphs are left out."""
    from onnx import helper

    out = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        if isinstance(value, (int, float, str)) or (
            isinstance(value, list) and all(isinstance(v, (int, float)) for v in value)
        ):
            out[a.name] = value
    return out


# The element types ONNX Runtime's trace names in a node's type-and-shape lists.
ELEMENT_BYTES = {
    "float": 4, "double": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "float8e4m3fn": 1, "float8e5m2": 1,
}  # fmt: skip


def traced_bytes(args: dict[str, Any]) -> int | None:
    """The bytes a node reads and writes in one run, from the shapes its trace event records
    (``input_type_shape``, ``output_type_shape``: ``[{"float": [4, 3, 32, 32]}, ...]``);
    None where the event records none or a type or size it cannot count (a sequence)."""
    lists = [args.get("input_type_shape"), args.get("output_type_shape")]
    if not any(lists):
        return None
    total = 0
    for entry in (t for listed in lists for t in listed or ()):
        for dtype, shape in entry.items():
            size = ELEMENT_BYTES.get(dtype)
            sized = isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
            if size is None or not sized:
                return None
            total += size * math.prod(shape)
    return total
