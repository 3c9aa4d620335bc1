"""What a path given to ``dlbench verify`` is, and how to get its outputs.

Four kinds, each run where it can run:

* ``checkpoint`` (a ``dlbench train`` directory, its manifest.json, or a bare
  .pt/.keras/.ckpt with ``--model``): the native framework, in the export cell;
* ``onnx``: ONNX Runtime on the CPU, in this process;
* ``mindir``: MindSpore's GraphCell, in the export cell;
* ``tensorrt`` (.plan/.engine/.trt with its sidecar): the TensorRT cell,
  after the sidecar says the engine belongs to this GPU and TensorRT.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dlbench.converters import onnx_io, verify
from dlbench.converters.tensorrt_runtime import ENGINE_SUFFIXES
from dlbench.models.errors import UserError

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".keras", ".ckpt", ".json")


@dataclass
class Source:
    path: Path
    kind: str                      # checkpoint | onnx | mindir | tensorrt
    precision: str = "fp32"
    model: str | None = None
    framework: str | None = None
    checkpoint: Path | None = None
    summary: Any = None            # onnx_io.Summary for ONNX files
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def artifact_format(self) -> str | None:
        return {"onnx": "onnx", "mindir": "mindir", "tensorrt": "tensorrt"}.get(self.kind)


def identify(path: str | Path, framework: str | None = None, model: str | None = None) -> Source:
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if path.is_dir() and path.suffix in (".onnx", ".mindir", *ENGINE_SUFFIXES):
        onnx_io.check_readable(path, "model file")        # "is a directory"
    if path.is_dir() or path.suffix in CHECKPOINT_SUFFIXES:
        from dlbench.models.native import checkpoint_manifest

        ckpt, manifest = checkpoint_manifest(path, framework, model)
        from dlbench.models.registry import get_model
        from dlbench.harness.frameworks import require

        spec = get_model(manifest["model"])
        require(manifest["framework"])
        if manifest["framework"] not in spec.builders:
            raise UserError(f"model {spec.name!r} has no {manifest['framework']} implementation")
        return Source(path, "checkpoint", "fp32", spec.name, manifest["framework"], ckpt,
                      meta=manifest)
    if path.suffix == ".mindir":
        onnx_io.check_readable(path, "MindIR file")
        return Source(path, "mindir", "fp32", model, "mindspore")
    if path.suffix in ENGINE_SUFFIXES:
        from dlbench.converters.onnx_to_tensorrt import availability_problems
        from dlbench.converters.tensorrt_runtime import check_engine_here

        problems = availability_problems()
        if problems:
            raise UserError(f"{path}: cannot run a TensorRT engine here: " + "; ".join(problems))
        meta = check_engine_here(path)
        return Source(path, "tensorrt", meta.get("precision", "fp32"), meta.get("model"),
                      meta.get("framework"), meta=meta)
    model_proto = onnx_io.load(path)
    summary = onnx_io.summarize(model_proto)
    onnx_io.session(path)                 # an operator ONNX Runtime lacks: refused now
    return Source(path, "onnx", summary.precision, summary.metadata.get("model") or model,
                  summary.metadata.get("framework"), summary=summary, meta=summary.metadata)


def inputs_for(reference: Source, candidate: Source, batch_sizes: Sequence[int],
               seed: int) -> list[np.ndarray]:
    """The fixed inputs: the zoo model's when either side names one, else from the ONNX shape."""
    for s in (reference, candidate):
        if s.model:
            try:
                return verify.inputs_for_model(s.model, batch_sizes, seed)
            except UserError:
                continue
    for s in (reference, candidate):
        if s.summary is not None:
            return verify.inputs_for_onnx(s.summary, batch_sizes, seed, str(s.path))
    raise UserError(f"cannot tell what inputs {reference.path} and {candidate.path} take: "
                    f"give a checkpoint or an ONNX file on one side")


def outputs(source: Source, batches: Sequence[np.ndarray], *, env: dict[str, str] | None = None,
            timeout: float | None = None, threads: int | None = None) -> tuple[list[dict], dict]:
    """(outputs per batch, what ran: versions, timings)."""
    if source.kind == "onnx":
        import onnxruntime

        return (verify.onnx_outputs(source.path, batches, threads=threads),
                {"runtime": f"onnxruntime {onnxruntime.__version__} (CPU)"})
    from dlbench.harness.launcher import run_cell

    with tempfile.TemporaryDirectory(prefix="dlbench-verify-") as tmp:
        inputs, out = Path(tmp, "inputs.npz"), Path(tmp, "outputs.npz")
        verify.save_batches(inputs, batches)
        if source.kind == "tensorrt":
            kind = "tensorrt-run"
            payload = {"engine": str(source.path.resolve()), "inputs": str(inputs),
                       "outputs": str(out)}
        elif source.kind == "checkpoint":
            kind = "export"
            payload = {"framework": source.framework, "model": source.model,
                       "checkpoint": str(source.checkpoint.resolve()), "inputs": str(inputs),
                       "reference_out": str(out)}
        else:
            kind = "export"
            payload = {"framework": "mindspore", "model": None, "inputs": str(inputs),
                       "mindir": str(source.path.resolve()), "candidate_out": str(out)}
        outcome = run_cell(kind, payload, env=env, timeout=timeout)
        if outcome.status == "usage_error":
            raise UserError(outcome.error)
        if not outcome.ok:
            raise RunFailed(f"{source.path}: {outcome.error}", outcome)
        info = dict(outcome.result)
        info["cell"] = {"wall_s": outcome.wall_s, "peak_rss_mb": outcome.peak_rss_mb}
        return verify.load_outputs(out), info


class RunFailed(Exception):
    """A runner's cell failed at run time (a crash, a timeout); the record says why."""

    def __init__(self, message: str, outcome=None):
        super().__init__(message)
        self.outcome = outcome
