"""OpenVINO's side of the profile cell: the CPU plugin's performance counters.

The runner is the OpenVINO backend's own (``OvRunner``: precision hint, threads, streams
and shapes as bench sets them), compiled with ``PERF_COUNT`` on.  Each node's counter is
its mean time over every run since the model was compiled, warm-up included (each run
truncated to whole µs, the mean an integer division): after 20 runs of resnet50-mini at
batch 1 its stem read 54 µs, after one run at batch 64 1,235 µs, after one more at batch
1 still 1,183 µs.  So the counters are read twice, after the warm-up and after the
measured runs, and a node's time per measured run is the difference of the two totals
over the measured runs' count: the warm-up is left out, as ONNX Runtime's profile leaves
it out by its run windows.

A counter names a node of the plugin's runtime graph, and a fused node takes its *last*
source node's name: bert-tiny's MatMul and bias run as one ``FullyConnected`` named after
the Add, and its attention core as one ``Subgraph`` named after a Transpose.  So a node is
classed by everything it runs: the source ops of the layers the runtime graph says it
was made of (``originalLayersNames``) and its own type (``Convolution``,
``FullyConnected``, ``Reorder``, declared in ``profile.classes`` too), the first of them
in the classes' order, heaviest kinds of work first (that attention core: matmul).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dlbench.harness.profile.child import timed_runs

# Runtime-graph nodes that hold data rather than run: never timed.
SILENT = ("Parameter", "Result", "Constant", "Input", "Output")
# What each run's reading loses on average: the counters truncate every run to whole µs,
# so a node of 0.6 µs adds 0 every run.
TRUNCATED_US = 0.5


def profile_runs(runner, feeds: dict[str, Any], warmup: int, iterations: int, tmp: str) -> dict[str, Any]:
    runner.perf_counts = True
    runner.load()
    handle = runner.prepare(feeds)
    read: dict[str, list[Any]] = {}

    @contextlib.contextmanager
    def counted() -> Iterator[None]:
        read["before"] = runner.counters() if warmup else []
        yield
        read["after"] = runner.counters()

    wall_ms = timed_runs(runner, handle, warmup, iterations, profiled=counted)
    ops = fused_ops(runner.compiled, source_ops(runner.artifact.path))
    node_time = "real time of its runtime-graph node, from the CPU plugin's performance counters"
    found = node_times(read["before"], read["after"], warmup, iterations, ops)
    return {"wall_ms_per_run": wall_ms, **found, "node_time": node_time}


def source_ops(path: str) -> dict[str, str]:
    """The source graph's op type by node name and by output name (a node without a
    name is known to the plugin by its output's)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    found = {o: n.op_type for n in graph.node for o in n.output}
    return found | {n.name: n.op_type for n in graph.node if n.name}


def fused_ops(compiled, source: dict[str, str]) -> dict[str, tuple[str, str | None, str | None]]:
    """Per runtime-graph node, the op it is classed by: of its source layers' ops and its
    own type, the one whose class comes first in ``OP_CLASSES`` (any declared before none);
    the last source layer it was made of; and for a node made of none (one the plugin
    named for itself, like ``LSTMSequence_41761`` of a bidirectional LSTM it split), the
    nearest source layer upstream of it: what fed it.  The plugin's order does not tell
    it: it runs independent branches interleaved, and a generated network's LSTM
    sequences ran after a convolution of another lane (``counts.unit_costs``)."""
    from dlbench.harness.profile.classes import OP_CLASSES, op_class

    rank = {c: i for i, c in enumerate(OP_CLASSES)}
    ordered = list(compiled.get_runtime_model().get_ordered_ops())
    made: dict[str, list[str]] = {}
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for op in ordered:
        info = op.get_rt_info()
        made_of = [n for n in info["originalLayersNames"].astype(str).split(",") if n in source]
        made[op.get_friendly_name()] = made_of
        ops = [source[n] for n in made_of] + [info["layerType"].astype(str)]
        chosen = min(ops, key=lambda o: rank.get(op_class(o), len(rank)))
        out[op.get_friendly_name()] = (chosen, made_of[-1] if made_of else None, None)
    for op in ordered:
        name = op.get_friendly_name()
        if not made[name]:
            out[name] = (out[name][0], None, _fed_by(op, made))
    return out


def _fed_by(op, made: dict[str, list[str]]) -> str | None:
    """The last source layer of the nearest node upstream of ``op`` made of one (breadth
    first over its inputs)."""
    seen, frontier = set(), [op]
    while frontier:
        nxt = []
        for node in frontier:
            for port in node.inputs():
                up = port.get_source_output().get_node()
                name = up.get_friendly_name()
                if name in seen:
                    continue
                seen.add(name)
                if made.get(name):
                    return made[name][-1]
                nxt.append(up)
        frontier = nxt
    return None


def node_times(
    before: list[Any],
    after: list[Any],
    warmup: int,
    iterations: int,
    ops: dict[str, tuple[str, str | None, str | None]],
) -> dict[str, Any]:
    """Each executed node's time per measured run (µs), from its counter's mean after the
    ``warmup`` runs (``before``) and after the ``iterations`` more (``after``), in the
    order the plugin ran them, slowest first; its op and source layer (``fused_ops``; for
    a node made of none, the layer that fed it), the plugin's node type and kernel.  A
    node's mean is over every run it ran in, so a node every run executes has run
    ``warmup`` and ``warmup + iterations`` times; each gets back the ``TRUNCATED_US`` per
    run that truncation took off."""
    mean_before = {i.node_name: i.real_time.total_seconds() * 1e6 for i in before}
    nodes: list[dict[str, Any]] = []
    for info in after:
        if info.node_type in SILENT or info.status != info.Status.EXECUTED:
            continue
        total = info.real_time.total_seconds() * 1e6 * (warmup + iterations)
        spent = total - mean_before.get(info.node_name, 0.0) * warmup
        op, made_of, fed_by = ops.get(info.node_name, (info.node_type, None, None))
        nodes.append(
            {
                "node": info.node_name,
                "op": op,
                "source": made_of,
                "kernel": info.node_type,
                "provider": info.exec_type,
                "us": max(0.0, spent / iterations) + TRUNCATED_US,
                "at": len(nodes),
                **({"fed_by": fed_by} if fed_by else {}),
            }
        )
    return {"nodes": sorted(nodes, key=lambda r: -r["us"]), "optimized_nodes": len(nodes)}
