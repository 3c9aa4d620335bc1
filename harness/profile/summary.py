"""A profile cell's node times summed per op class, beside the class's FLOPs and bytes.

One summary for every profiler, so the table, the report and the advisor read any
backend's profile alike.  FLOPs come from where the profiler's declaration says: the
ONNX graph at the profiled shapes, per op type (ONNX Runtime's profiler counts none), or
the nodes themselves (the PyTorch profiler's count per op).  A count that covers only
some of a class's nodes is kept and marked ``flops_partial``: the nodes it lacks are
unknown, not zero, and a GFLOP/s over them would be invented.
"""

from __future__ import annotations

from typing import Any

from dlbench.harness.profile.profilers import Profiler

TOP_NODES = 40


def summarize(
    result: dict[str, Any],
    by_type: dict[str, dict[str, float]] | None,
    batch: int,
    profiler: Profiler,
    top: int | None = TOP_NODES,
) -> dict[str, Any]:
    """Node times per class beside the class's FLOPs (and bytes, where the nodes carry
    them); the ``top`` slowest nodes (None: every node, for the synthetic benchmark's
    workload); each op type's share of the time over every node."""
    from dlbench.harness.profile.classes import node_class, op_class

    nodes = result["nodes"]
    total_us = sum(n["us"] for n in nodes) or 1.0
    members: dict[str, list[dict[str, Any]]] = {}
    op_types: dict[str, float] = {}
    for n in nodes:
        members.setdefault(node_class(n), []).append(n)
        op_types[n["op"]] = op_types.get(n["op"], 0.0) + n["us"] / total_us
    graph: dict[str, dict[str, float]] = {}
    for op, w in (by_type or {}).items():
        counted = graph.setdefault(op_class(op), {"work": 0.0, "uncounted": 0})
        counted["work"] += 2 * w["macs"] + w["other"]
        counted["uncounted"] += w["uncounted"]
    out = []
    for cls, group in sorted(members.items(), key=lambda kv: -sum(n["us"] for n in kv[1])):
        us = sum(n["us"] for n in group)
        row: dict[str, Any] = {
            "class": cls,
            "share": us / total_us,
            "ms_per_run": us / 1000,
            "nodes": len(group),
            "ops": sorted({n["op"] for n in group}),
        }
        if by_type is not None:
            gflop = graph.get(cls, {}).get("work", 0.0) / 1e9
            row.update(
                gflop_per_run=gflop,
                gflops=gflop / (us / 1e6) if gflop and us else None,
                flops_partial=bool(graph.get(cls, {}).get("uncounted")),
            )
            if any("bytes" in n for n in group):  # the trace's sizes, the graph's FLOPs
                moved = _bytes(group)
                row.update(moved, flop_per_byte=gflop * 1e9 / moved["bytes_per_run"] if gflop else None)
        else:
            row.update(_node_work(group))
        out.append(row)
    return {
        "profiler": profiler.tool,
        "wall_ms_per_run": result["wall_ms_per_run"],
        # The same runs with no profiler (absent from records made before it was measured).
        "plain_ms_per_run": result.get("plain_ms_per_run"),
        **{k: result[k] for k in ("plain_runs", "plain_window_s", "plain_warmup_runs") if k in result},
        "node_ms_per_run": total_us / 1000,
        "node_time": result.get("node_time", "kernel time"),  # what a node's time is
        "classes": out,
        "op_types": dict(sorted(op_types.items(), key=lambda kv: -kv[1])),  # share of node time, all nodes
        "nodes": [_node(n, total_us) for n in nodes[:top]],
        "node_count": len(nodes),
        "optimized_nodes": result.get("optimized_nodes"),
        "batch_size": batch,
        "flops_source": profiler.flops_source,
        "bytes_source": profiler.bytes_source,
    }


def _node(n: dict[str, Any], total_us: float) -> dict[str, Any]:
    from dlbench.harness.profile.classes import node_class

    out = {**n, "class": node_class(n), "share": n["us"] / total_us}
    if n.get("flops") is not None and n.get("bytes"):
        out["flop_per_byte"] = n["flops"] / n["bytes"]
    return out


def _node_work(group: list[dict[str, Any]]) -> dict[str, Any]:
    """A class's FLOPs, bytes and arithmetic intensity from its nodes' own counts: the sum
    of what is known, partial where some nodes' are not."""
    counted = [n for n in group if n.get("flops") is not None]
    both = [n for n in counted if n.get("bytes") is not None]
    flops = sum(n["flops"] for n in counted)
    counted_us = sum(n["us"] for n in counted)
    both_bytes = sum(n["bytes"] for n in both)
    return {
        "gflop_per_run": flops / 1e9 if counted else None,
        # The counted nodes' FLOPs over the counted nodes' time.
        "gflops": flops / 1e9 / (counted_us / 1e6) if flops and counted_us else None,
        "flops_partial": 0 < len(counted) < len(group),
        **_bytes(group),
        "flop_per_byte": sum(n["flops"] for n in both) / both_bytes if both and both_bytes else None,
    }


def _bytes(group: list[dict[str, Any]]) -> dict[str, Any]:
    """The bytes a class's nodes move, partial where some nodes' sizes are unknown."""
    sized = [n for n in group if n.get("bytes") is not None]
    return {
        "bytes_per_run": sum(n["bytes"] for n in sized) if sized else None,
        "bytes_partial": 0 < len(sized) < len(group),
    }
