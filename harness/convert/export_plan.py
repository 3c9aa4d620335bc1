"""What ``dlbench export`` will do, decided before it does anything: each source's
checkpoint, manifest and output path, with every refusal raised here (exit 2), never
after a long export.

Apart from the export itself so that the checks read as one list and the runner stays
about running.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io
from dlbench.converters.base import EXPORT_HOPS
from dlbench.core.atomic import check_can_create
from dlbench.core.errors import UserError
from dlbench.harness.convert.request import ExportRequest
from dlbench.harness.formats import ZOO
from dlbench.harness.store.results import ResultStore
from dlbench.harness.verify import inputs as vin

FORMATS = ("onnx", "mindir")
EXPORTERS = ("torchscript", "dynamo")


@dataclass
class Plan:
    source: Path
    checkpoint: Path | None
    manifest: dict[str, Any]
    out: Path
    artifact: Any = None  # a user's model (bench.artifacts.Artifact), else None


def plan(req: ExportRequest) -> list[Plan]:
    """Validate everything before any work: exit 2 here, never after a long export."""
    from dlbench.harness.machine.frameworks import is_installed, require
    from dlbench.models.native import checkpoint_manifest
    from dlbench.models.registry import get_model

    opts = req.options
    if not req.sources and not req.model_from:
        raise UserError("no checkpoint given (a model file, a train output or --model-from)")
    if req.out and len(req.sources) + bool(req.model_from) > 1:
        raise UserError("--out names one file; give one checkpoint with it")
    if opts.format not in FORMATS:
        raise UserError(f"--format {opts.format}: choose from {', '.join(FORMATS)}")
    if opts.exporter not in EXPORTERS:
        raise UserError(f"--exporter {opts.exporter}: choose from {', '.join(EXPORTERS)}")
    max_opset = onnx_io.onnx().defs.onnx_opset_version()
    if not 7 <= opts.opset <= max_opset:
        raise UserError(f"--opset {opts.opset}: this onnx supports opsets 7 to {max_opset}")
    if opts.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {opts.batch_size}")
    if req.threads is not None and req.threads < 1:
        raise UserError(f"--threads must be at least 1, got {req.threads}")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    vin.parse_batch_sizes(req.batch_sizes)
    plans = [_user_plan(req, art) for art in _user_artifacts(req)]
    for src in req.sources:
        if not _is_checkpoint(req, src):
            continue
        ckpt, manifest = checkpoint_manifest(src, req.framework, req.model)
        spec = get_model(manifest["model"])
        fw = manifest["framework"]
        if fw not in EXPORT_HOPS:
            raise UserError(f"{src}: no exporter for framework {fw!r}")
        require(fw)
        if fw not in spec.builders:
            raise UserError(f"{src}: model {spec.name!r} has no {fw} implementation")
        if opts.format == "mindir" and fw != "mindspore":
            raise UserError(f"--format mindir: only MindSpore checkpoints export MindIR ({src} is {fw})")
        if opts.exporter == "dynamo" and fw != "pytorch":
            raise UserError("--exporter dynamo applies to PyTorch checkpoints only")
        if opts.exporter == "dynamo" and not is_installed("onnxscript"):
            raise UserError(
                "--exporter dynamo needs onnxscript: pip install onnxscript "
                "(or use the default TorchScript exporter)"
            )
        out = Path(req.out) if req.out else ckpt.parent / f"model.{opts.format}"
        check_can_create(out)
        plans.append(Plan(Path(src), ckpt, manifest, out))
    if req.json_path:
        check_can_create(req.json_path)
    ResultStore(req.db).check_writable()
    return plans


def _is_checkpoint(req: ExportRequest, src: str) -> bool:
    """A zoo checkpoint (a train output, or a bare file with --model), not a user's model."""
    path = Path(src)
    return (
        req.model is not None
        or path.suffix == ".json"
        or (path.is_dir() and (path / "manifest.json").is_file())
    )


def _user_artifacts(req: ExportRequest) -> list[Any]:
    """The users' models among the sources (and --model-from), probed in their cells."""
    from dlbench.harness.bench.artifacts import resolve, resolve_code, weights_for

    hints = {"shapes": req.shapes, "inputs": req.inputs, "timeout": req.timeout}
    sources = [src for src in req.sources if not _is_checkpoint(req, src)]
    filled = weights_for(sources, req.model_from, req.weights)
    arts = [resolve(src, weights=filled.get(src), **hints) for src in sources]
    for art in arts:
        if art.format == ZOO:  # "already zoo" said nothing to someone who wants its ONNX
            raise UserError(
                f"{art.label}: a zoo name; export takes the checkpoint 'dlbench train {art.label} "
                f"--out DIR' saves (DIR/{art.label}/FRAMEWORK), or your own model file; "
                f"'dlbench run {art.label}' trains and exports in one command"
            )
        if not art.user:
            raise UserError(f"{art.label}: already {art.format}; export takes a framework's model")
    if req.model_from:
        arts.append(resolve_code(req.model_from, req.weights, **hints))
    return arts


def _user_plan(req: ExportRequest, art) -> Plan:
    from dlbench.harness.machine.frameworks import require

    fw = art.ref.framework
    require(fw)
    if art.ref.meta.get("kind") == "mindir":
        raise UserError(
            f"{art.label}: MindSpore exports ONNX from a network's code, not from "
            f"a MindIR graph: give --model-from FILE.py:CALLABLE"
        )
    if req.options.format != "onnx":
        raise UserError(f"--format {req.options.format}: a user's {fw} model exports ONNX only")
    src = Path(art.ref.path) if art.ref.path else Path(f"{art.ref.model}.py")
    out = Path(req.out) if req.out else src.with_name(f"{art.ref.model}.onnx")
    check_can_create(out)
    manifest = {
        "model": art.ref.model,
        "framework": fw,
        "framework_version": art.ref.meta.get("framework_version"),
    }
    return Plan(Path(art.label), Path(art.ref.path) if art.ref.path else None, manifest, out, art)
