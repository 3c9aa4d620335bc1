"""What one artifact contributes to every cell of a bench sweep: its input shapes (the
user's, the model's own, or each point of a ``--dim`` sweep), value ranges, batch sizes
per scenario and FLOP count; planned here, in the parent, so a shape left open is
refused before any cell runs."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.tensors import follow_batch
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.bench.artifacts import Artifact
from dlbench.harness.bench.given import GivenInput
from dlbench.harness.bench.given import read_all as read_given
from dlbench.harness.bench.input_args import swept_shapes
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.bench.scenarios import get_scenario


def _flops(
    art: Artifact, shapes_for_batch: dict[str, tuple[int, ...]] | None, batch: int
) -> dict[str, Any] | None:
    if art.onnx_model is not None and shapes_for_batch is not None:
        from dlbench.harness.bench import flops

        try:
            return {**flops.count(art.onnx_model, shapes_for_batch, batch), "source": "onnx graph"}
        except Exception as exc:  # noqa: BLE001 - a count we cannot make is a note, not a failure
            return {"gflops_per_sample": None, "error": f"{type(exc).__name__}: {exc}"}
    if art.user:
        return {
            "gflops_per_sample": None,
            "source": "not counted: a native model of the "
            "user's (export it to ONNX and bench that for a graph count)",
        }
    if art.own_precision is None:
        from dlbench.models.registry import get_model

        spec = get_model(art.ref.model)
        return {
            "gflops_per_sample": spec.gflops_per_sample,
            "source": "zoo analytic count (convolutions, dense layers, recurrent cells, attention products)",
        }
    return None


@dataclass
class ArtifactAxes:
    """What one artifact contributes to all its cells: inputs, batch sizes, FLOPs, notes."""

    shapes: dict[str, tuple[int, ...]]
    ranges: dict[str, tuple[int, int]]
    sizes_by_scenario: dict[str, list[int]]
    gflops: dict[str, Any] | None
    shape_notes: list[str]
    given: dict[str, GivenInput]
    dims: dict[str, int] = field(default_factory=dict)


def artifact_axes(art: Artifact, req: BenchRequest, notes: list[str]) -> list[ArtifactAxes]:
    """One set of axes per point of the ``--dim`` sweep (one when there is none)."""
    base = _base_axes(art, req, notes, planned=not req.dims)
    if not req.dims:
        return [base]
    if art.signature is None:
        raise UserError(f"--dim: {art.label} does not say its inputs' dimensions")
    out = []
    # The model's own sizes note would name the size the sweep replaced: each point says its own.
    notes_kept = [n for n in base.shape_notes if n != art.default_shapes_note]
    for dims, shapes in swept_shapes(art.signature, base.shapes, req.dims, art.label):
        said = "--dim sweep point: " + ", ".join(f"{k}={v}" for k, v in dims.items())
        point = replace(base, shapes=shapes, dims=dims, shape_notes=[*notes_kept, said])
        point.gflops = _planned_flops(art, point)
        out.append(point)
    return out


def _base_axes(art: Artifact, req: BenchRequest, notes: list[str], planned: bool = True) -> ArtifactAxes:
    scenarios = req.scenario_names()
    names = {t.name for t in art.signature} if art.signature else None
    shapes = {k: v for k, v in req.shapes.items() if names is None or k in names}
    given = read_given({k: v for k, v in req.inputs.items() if names is None or k in names})
    # The user's --shape, or the zoo model's own sizes (and a note in each record),
    # except where an --input file gives the shape.
    shape_notes = [art.default_shapes_note] if not shapes and art.default_shapes else []
    if art.user:
        shape_notes += art.notes  # what its file does not say, in every record
    shapes = art.shapes_for(shapes, given)
    ranges = {k: v for k, v in req.int_ranges.items() if names is None or k in names}
    sizes_by_scenario = {}
    for s in scenarios:
        sizes = get_scenario(s).batch_sizes(req.batch_sizes)
        if art.signature:
            followed, note = follow_batch(art.signature, sizes, "running")
            if note:
                notes.append(f"{art.label}: {note}")
                sizes = list(followed)
        sizes_by_scenario[s] = sizes
    axes = ArtifactAxes(shapes, ranges, sizes_by_scenario, None, shape_notes, given)
    if planned:  # a --dim sweep plans each of its points instead
        axes.gflops = _planned_flops(art, axes)
    return axes


def _planned_flops(art: Artifact, axes: ArtifactAxes) -> dict[str, Any] | None:
    """Every batch size's inputs planned (a shape left open is refused here, before any
    cell), and the FLOP count at the smallest."""
    if art.signature is None:
        return _flops(art, None, 1) if art.own_precision is None else None
    try:
        plans = {
            b: inputs_mod.plan(art.signature, b, axes.shapes, axes.ranges, art.graph_ranges, axes.given)
            for sizes in axes.sizes_by_scenario.values()
            for b in sizes
        }
    except UserError as exc:
        raise UserError(f"{art.label}: {exc}") from None
    first = min(plans)
    return _flops(art, {i.name: i.shape for i in plans[first].inputs}, first)
