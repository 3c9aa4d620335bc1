"""OpenVINO's side of the profile cell: the CPU plugin's performance counters, per run.

The runner is the OpenVINO backend's own (``OvRunner``: precision hint, threads, streams
and shapes as bench sets them), compiled with ``PERF_COUNT`` on.  The counters hold the
last run only, so they are read after each measured run and summed; the warm-up runs
are never read.  A counter names a node of the plugin's runtime graph, and a fused node takes its
*last* source node's name: bert-tiny's MatMul and bias run as one ``FullyConnected``
named after the Add, and its attention core as one ``Subgraph`` named after a Transpose.
So a node is classed by everything it runs: the source ops of the layers the runtime
graph says it was made of (``originalLayersNames``) and its own type (``Convolution``,
``FullyConnected``, ``Reorder``, declared in ``profile.classes`` too), the first of them
in the classes' order, heaviest kinds of work first (that attention core: matmul).  The counters
count whole microseconds: a node under 1 µs a run reads as a fraction only in the mean.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dlbench.harness.profile.child import timed_runs

# Runtime-graph nodes that hold data rather than run: never timed.
SILENT = ("Parameter", "Result", "Constant", "Input", "Output")
SLOW_RUN = 1.5  # a run this many times the median run's node time was paused: left out
# What a reading loses on average: the counters truncate to whole µs, so a node of 0.6 µs
# reads 0 every run.  din-mini's ~70 small nodes read 1 µs in all at batch 1 (on
# OpenVINO, 40 µs a run timed); half a µs each puts them back near their time.
TRUNCATED_US = 0.5


def profile_runs(runner, feeds: dict[str, Any], warmup: int, iterations: int, tmp: str) -> dict[str, Any]:
    runner.perf_counts = True
    runner.load()
    handle = runner.prepare(feeds)
    runs: list[list[Any]] = []

    @contextlib.contextmanager
    def read() -> Iterator[None]:
        yield
        runs.append(runner.last_profile())

    wall_ms = timed_runs(runner, handle, warmup, iterations, each=read)
    ops = fused_ops(runner.compiled, source_ops(runner.artifact.path))
    node_time = "real time of its runtime-graph node, from the CPU plugin's performance counters"
    return {"wall_ms_per_run": wall_ms, **node_times(runs, ops), "node_time": node_time}


def source_ops(path: str) -> dict[str, str]:
    """The source graph's op type by node name and by output name (a node without a
    name is known to the plugin by its output's)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    found = {o: n.op_type for n in graph.node for o in n.output}
    return found | {n.name: n.op_type for n in graph.node if n.name}


def fused_ops(compiled, source: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Per runtime-graph node, the op it is classed by: of its source layers' ops and its
    own type, the one whose class comes first in ``OP_CLASSES`` (any declared before none);
    and the last source layer it was made of (a node the plugin named for itself, like
    ``LSTMSequence_41761``, is known by it)."""
    from dlbench.harness.profile.classes import OP_CLASSES, op_class

    rank = {c: i for i, c in enumerate(OP_CLASSES)}
    out = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        made_of = [n for n in info["originalLayersNames"].astype(str).split(",") if n in source]
        ops = [source[n] for n in made_of] + [info["layerType"].astype(str)]
        chosen = min(ops, key=lambda o: rank.get(op_class(o), len(rank)))
        out[op.get_friendly_name()] = (chosen, made_of[-1] if made_of else None)
    return out


def node_times(runs: list[list[Any]], ops: dict[str, tuple[str, str | None]]) -> dict[str, Any]:
    """Each executed node's time per run (µs), in the order the plugin ran them, slowest
    first; its op and source layer (``fused_ops``), the plugin's node type and kernel.

    Runs are read one at a time, so a run the machine paused in (its nodes' total over
    ``SLOW_RUN`` times the median run's) is left out whole: on a busy 2-core machine one
    pause of tens of ms inside one node of a 0.1 ms network made it 90 % of the profile
    (a convolution network read 7 % convolution).  The mean over the runs kept, not each
    node's median, because the counters count whole µs and a small node's median is 0;
    each executed node's reading gets back the ``TRUNCATED_US`` truncation took off."""
    import statistics

    def executed(run: list[Any]) -> list[Any]:
        return [i for i in run if i.node_type not in SILENT]

    totals = [sum(i.real_time.total_seconds() for i in executed(run)) for run in runs]
    usual = statistics.median(totals) if totals else 0.0
    kept = [run for run, t in zip(runs, totals) if t <= SLOW_RUN * usual]
    rows: dict[str, dict[str, Any]] = {}
    for run in kept:
        for info in executed(run):
            row = rows.get(info.node_name)
            if row is None:
                op, made_of = ops.get(info.node_name, (info.node_type, None))
                row = rows[info.node_name] = {
                    "node": info.node_name,
                    "op": op,
                    "source": made_of,
                    "kernel": info.node_type,
                    "provider": info.exec_type,
                    "us": 0.0,
                    "at": len(rows),
                    "executed": False,
                }
            ran = info.status == info.Status.EXECUTED
            row["us"] += info.real_time.total_seconds() * 1e6 + (TRUNCATED_US if ran else 0.0)
            row["executed"] |= ran
    nodes = [r for r in rows.values() if r.pop("executed")]
    for row in nodes:
        row["us"] /= len(kept) or 1
    return {
        "nodes": sorted(nodes, key=lambda r: -r["us"]),
        "optimized_nodes": len(nodes),
        "runs_left_out": len(runs) - len(kept),
    }
