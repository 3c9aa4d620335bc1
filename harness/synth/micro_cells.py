"""The micro baseline the synthetic network must beat: one GEMM and one convolution cell,
weighted by the share of the set's FLOPs each kind does.

This is what a person predicting a set of applications from ``dlbench micro`` would do:
time the two kernels that do most of the arithmetic, at a shape the set really runs, and
weigh each by how much of the set's work is of its kind.  Each cell is the set's heaviest
shape of its kind (most FLOPs over all its applications, each application by its weight):
a real layer, as ``dlbench micro --model`` takes them, not a library's peak size.
The cells are ONNX files of one op, so the validation matrix runs them exactly as it runs
everything else (every backend, build, batch size, thread count and allocator), and the
comparison is between predictors, not between harnesses.  What they cannot see is the
point of the comparison: the element-wise, normalization and data-movement time the set
also spends, and how fusion changes across engines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.harness.synth.units import Unit

# The kinds a micro benchmark times, by the op a unit emits.
KINDS = {"Conv": "conv", "MatMul": "gemm"}
PREDICTOR = "micro GEMM/conv cells, FLOP-weighted"


def cells(workload: dict[str, Any]) -> list[tuple[str, Unit, float]]:
    """(kind, the heaviest shape of that kind, its weight) for each kind the set runs; the
    weights are the kinds' shares of the set's GEMM and conv FLOPs, each application's
    shares counted by its weight (as the score counts it), summing to 1."""
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
        heaviest = max((u for u in heaviness if KINDS[u.op] == kind), key=lambda u: heaviness[u])
        out.append((kind, heaviest, weight[kind] / whole))
    return out


def write(
    workload: dict[str, Any], home: Path, stem: str, seed: int = 0, say: Any = lambda _: None
) -> list[dict[str, Any]]:
    """The cells as ONNX files in ``home`` (``STEM.micro-gemm.onnx``, ...) with their
    framework versions (the network's own writers, so the native backends run them too),
    described for the network's description: file, kind, shape class, weight, versions."""
    import onnx

    from dlbench.harness.synth.emit import network, spec
    from dlbench.harness.synth.frameworks import write_versions
    from dlbench.harness.synth.workload import shape_class

    described = []
    for kind, unit, weight in cells(workload):
        path = home / f"{stem}.micro-{kind}.onnx"
        model = network([(unit, 1)], seed, name=path.stem)
        onnx.helper.set_model_props(model, {"dlbench.model": path.stem, **spec([(unit, 1)])})
        onnx.save(model, str(path))
        versions, errors = write_versions(path, say)
        described.append(
            {
                "onnx": path.name,
                "kind": kind,
                "shape_class": shape_class(unit),
                "weight": weight,
                "frameworks": versions,
                "framework_errors": errors,
            }
        )
    return described
