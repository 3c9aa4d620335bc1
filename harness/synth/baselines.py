"""The generated baselines the synthetic network must beat, written beside it by generate
and scored by validate like it.

**Micro cells.**  One GEMM and one convolution cell, weighted by the share of the set's
FLOPs each kind does: what a person predicting a set of applications from ``dlbench
micro`` would do.  Each cell is the FLOP-weighted medoid of its kind's shapes (every
application by its weight): a real layer, as ``dlbench micro --model`` takes them, not a
library's peak size.  What they cannot see is the point of the comparison: the
element-wise, normalization and data-movement time the set also spends, and how fusion
changes across engines.

**Layer replays.**  Each application's layers, every one at its own shapes and count,
replayed one after another as a network of their own (fresh weights, bridged where one
output does not fit the next input): ``dlbench layer --model`` for the whole set.  It
costs as much to run as the applications, so it is the accuracy bound of rebuilding a set
from its layers, not a cheaper benchmark.

Both are ONNX files made by the network's own emitter, with the network's framework
versions, so the validation matrix runs them exactly as it runs everything else (every
backend, build, batch size, thread count and allocator), and the comparison is between
predictors, not between harnesses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dlbench.converters.int8_recipe import mode_metadata
from dlbench.harness.synth.fit import kmedoids
from dlbench.harness.synth.units import Unit

# The kinds a micro benchmark times, by the op a unit emits.
KINDS = {"Conv": "conv", "MatMul": "gemm"}
MICRO = "micro GEMM/conv cells, FLOP-weighted"
REPLAY = "layer replay of every application"


def cells(workload: dict[str, Any]) -> list[tuple[str, Unit, float]]:
    """(kind, the shape that stands for that kind, its weight) for each kind the set runs;
    the weights are the kinds' shares of the set's GEMM and conv FLOPs, each application's
    shares counted by its weight (as the score counts it), summing to 1.  The shape is the
    kind's FLOP-weighted medoid (the generator's own k-medoids with one cluster): a real
    shape nearest to all the others by work, traffic, weights and dimensions, where the
    single heaviest one would be a tiny model's only layer whenever applications count
    alike (a CTR model's 1x32x2 GEMM stood for BERT's)."""
    apps = workload["applications"]
    per_app: list[dict[str, float]] = [{} for _ in apps]
    by_unit: dict[int, dict[Unit, float]] = {i: {} for i in range(len(apps))}
    for node in workload["nodes"]:
        unit = Unit.from_json(node["unit"]) if node.get("unit") else None
        if unit is None or not unit.batched or unit.op not in KINDS:
            continue
        kind, flops = KINDS[unit.op], unit.flops()
        per_app[node["app"]][kind] = per_app[node["app"]].get(kind, 0.0) + flops
        by_unit[node["app"]][unit] = by_unit[node["app"]].get(unit, 0.0) + flops
    weight: dict[str, float] = {}
    heaviness: dict[Unit, float] = {}
    for i, app in enumerate(apps):
        total = sum(per_app[i].values())
        if not total:
            continue
        for kind, flops in per_app[i].items():
            weight[kind] = weight.get(kind, 0.0) + app["weight"] * flops / total
        for unit, flops in by_unit[i].items():
            heaviness[unit] = heaviness.get(unit, 0.0) + app["weight"] * flops / total
    whole = sum(weight.values())
    out = []
    for kind in sorted(weight):
        members = [u for u in heaviness if KINDS[u.op] == kind]
        w = np.array([heaviness[u] for u in members])
        [medoid], _ = kmedoids(np.array([u.features() for u in members]), w, [kind] * len(members), 1)
        out.append((kind, members[medoid], weight[kind] / whole))
    return out


def replays(workload: dict[str, Any]) -> list[list[tuple[Unit, int]]]:
    """Each application's units with how many of its nodes each stands for (its lanes)."""
    out: list[dict[Unit, int]] = [{} for _ in workload["applications"]]
    for node in workload["nodes"]:
        if node.get("unit"):
            unit = Unit.from_json(node["unit"])
            out[node["app"]][unit] = out[node["app"]].get(unit, 0) + 1
    return [list(lanes.items()) for lanes in out]


def write(workload: dict[str, Any], home: Path, stem: str, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The baselines as ONNX files in ``home`` (``STEM.micro-gemm.onnx``,
    ``STEM.replay-3.onnx``, ...), described for the network's description:
    {"micro_cells": [...], "replays": [...]}, each entry its file and weight (micro cells:
    FLOP share; replays: the application's weight).  Their framework versions are written
    with the network's, by generate."""
    import onnx

    from dlbench.harness.synth.emit import network, spec
    from dlbench.harness.synth.units import shape_class
    from dlbench.harness.synth.workload import app_int8_dynamic, named_in, set_mode

    # INT8 modes: a replay's is its application's, the cells' the set's (``set_mode``).
    dynamic = set_mode(workload["applications"])
    micro = [
        (f"{stem}.micro-{kind}.onnx", [(unit, 1)],
         {"kind": kind, "shape_class": shape_class(unit), "weight": weight, "int8_dynamic": dynamic})
        for kind, unit, weight in cells(workload)
    ]  # fmt: skip
    replayed = [
        (f"{stem}.replay-{i}.onnx", lanes,
         {"application": named_in(home, app["source"]), "weight": app["weight"],
          "int8_dynamic": app_int8_dynamic(app)})
        for i, (app, lanes) in enumerate(zip(workload["applications"], replays(workload)))
        if any(u.batched for u, _ in lanes)
    ]  # fmt: skip
    for name, lanes, about in micro + replayed:
        model = network(lanes, seed, name=Path(name).stem)
        # Its INT8 mode travels with it, as the network's does.
        carried = {"dlbench.model": Path(name).stem, **mode_metadata(about["int8_dynamic"])}
        onnx.helper.set_model_props(model, {**carried, **spec(lanes)})
        onnx.save(model, str(home / name))
    return {
        "micro_cells": [{"onnx": name, **about} for name, _, about in micro],
        "replays": [{"onnx": name, **about} for name, _, about in replayed],
    }
