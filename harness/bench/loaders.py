"""Each declared file format's loader (``harness.formats``: ONNX, a TensorRT engine, a
MindIR): the file read into an ``Artifact`` in the parent, with the shapes and value
ranges a zoo model's spec or the export's own record gives it.  Apart from
``artifacts``, which resolves every other kind of argument, for that module's size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlbench.harness.backends.base import ArtifactRef, TensorInfo
from dlbench.harness.bench.artifacts import (
    Artifact,
    neighbour_manifest,
    sha256_of,
    spec_ranges,
    user_artifact,
    zoo_artifact,
)
from dlbench.harness.formats import MINDIR, ONNX, TRT_ENGINE


def load_onnx(path: Path, arg: str, **_context: Any) -> Artifact:
    from dlbench.harness.bench import onnxinfo

    model = onnxinfo.load(path)
    inputs, _ = onnxinfo.signature(model)
    meta = onnxinfo.metadata(model)
    manifest = neighbour_manifest(path)
    # onnx_io.metadata strips the "dlbench." prefix of the keys it returns.
    name = meta.get("model") or manifest.get("model") or path.stem
    framework = meta.get("framework") or manifest.get("framework")
    ref = ArtifactRef(
        str(path.resolve()),
        ONNX,
        name,
        framework,
        None,
        {
            "opset": [{"domain": o.domain, "version": o.version} for o in model.opset_import],
            "ir_version": model.ir_version,
            "producer": model.producer_name,
        },
    )
    # The graph's tables first; a dlbench zoo model's spec fills what the graph hides
    # (Keras' embedding wraps its index in a negative-index select the search stops at).
    ranges = {**_zoo_ranges(name), **onnxinfo.embedding_ranges(model)}
    art = Artifact(ref, arg, sha256_of(path), inputs, onnxinfo.precision(model), ranges, model)
    art.default_shapes, whence = _zoo_shapes(name, inputs), f"zoo model {name!r}"
    if not art.default_shapes:
        art.default_shapes, whence = _recorded_shapes(meta, inputs), "the shapes its export recorded"
    if art.default_shapes:
        dims = ", ".join(f"{k}=" + "x".join(["N", *map(str, v[1:])]) for k, v in art.default_shapes.items())
        art.default_shapes_note = (
            f"dynamic dimensions sized from {whence} ({dims}, N the batch size); --shape overrides"
        )
        art.notes.append(f"{arg}: {art.default_shapes_note}")
    return art


def _recorded_shapes(meta: dict[str, str], signature: list[TensorInfo]) -> dict[str, tuple[int, ...]]:
    """The sizes a dlbench export verified at (``dlbench.input_shapes``) for the inputs whose
    non-batch dimensions the graph leaves dynamic: a transformer's sequence length."""
    try:
        recorded = json.loads(meta.get("input_shapes") or "{}")
    except ValueError:
        return {}
    out = {}
    for t in signature:
        shape = recorded.get(t.name) if isinstance(recorded, dict) else None
        dynamic = any(not isinstance(d, int) or d < 0 for d in t.shape[1:])
        if dynamic and isinstance(shape, list) and len(shape) == len(t.shape):
            if all(isinstance(d, int) and d > 0 for d in shape):
                out[t.name] = (1, *shape[1:])
    return out


def _spec_inputs(name: str | None) -> dict[str, Any]:
    """A zoo model's inputs by the names its ONNX export gives them."""
    from dlbench.models.registry import get_model, list_models

    if not name or name not in list_models():
        return {}
    spec = get_model(name)
    # A one-input export names its input "input" (converters.onnx_io.input_names).
    if len(spec.inputs) == 1:
        return {"input": spec.inputs[0], spec.inputs[0].name: spec.inputs[0]}
    return {i.name: i for i in spec.inputs}


def _zoo_shapes(name: str | None, signature: list[TensorInfo]) -> dict[str, tuple[int, ...]]:
    """Full shapes (batch 1) for the inputs whose non-batch dimensions the graph leaves
    dynamic, from the zoo spec the file was exported from; {} when nothing is dynamic
    or the file is not a zoo model's."""
    known = _spec_inputs(name)
    out = {}
    for t in signature:
        i = known.get(t.name)
        dynamic = any(not isinstance(d, int) or d < 0 for d in t.shape[1:])
        if i is not None and dynamic and len(t.shape) == len(i.shape) + 1:
            out[t.name] = (1, *i.shape)
    return out


def _zoo_ranges(name: str | None) -> dict[str, tuple[int, int]]:
    from dlbench.models.registry import get_model, list_models

    if not name or name not in list_models():
        return {}
    spec = get_model(name)
    ranges = spec_ranges(spec)
    # A one-input export names its input "input" (converters.onnx_io.input_names).
    if len(spec.inputs) == 1 and spec.inputs[0].name in ranges:
        ranges = {"input": ranges[spec.inputs[0].name]}
    return ranges


def load_engine(path: Path, arg: str, **_context: Any) -> Artifact:
    """A TensorRT engine and the sidecar ``dlbench build`` wrote next to it (required: it is
    what says which TensorRT and GPU the engine belongs to)."""
    from dlbench.converters.tensorrt_runtime import read_sidecar

    sidecar = read_sidecar(path)
    source = (sidecar.get("source") or {}).get("path") or sidecar.get("prepared_onnx")
    ref = ArtifactRef(
        str(path.resolve()),
        TRT_ENGINE,
        sidecar.get("model") or path.stem,
        sidecar.get("framework"),
        None,
        sidecar,
    )
    art = Artifact(ref, arg, sha256_of(path), None, sidecar.get("precision"), _zoo_ranges(ref.model))
    if source and Path(source).is_file():
        # The engine's inputs are its ONNX source's; the graph also gives FLOPs and tables.
        from dlbench.harness.bench import onnxinfo

        model = onnxinfo.load(source)
        art.signature = onnxinfo.signature(model)[0]
        art.graph_ranges = {**art.graph_ranges, **onnxinfo.embedding_ranges(model)}
        art.onnx_model = model
    return art


def load_mindir(path: Path, arg: str, shapes=None, inputs=None, timeout=None) -> Artifact:
    sidecar: dict[str, Any] = {}
    for candidate in (path.with_name(path.name + ".json"), path.with_suffix(".json")):
        if candidate.is_file():
            sidecar = json.loads(candidate.read_text())
            break
    manifest = neighbour_manifest(path)
    name = sidecar.get("model") or manifest.get("model") or path.stem
    if sidecar.get("inputs"):
        sig = [TensorInfo(i["name"], i.get("dtype", "float32"), tuple(i["shape"])) for i in sidecar["inputs"]]
    else:
        from dlbench.models.registry import list_models

        if name not in list_models():  # a user's graph: it records its inputs
            from dlbench.models.user import sniff

            return user_artifact(sniff(path), arg, shapes, inputs, timeout)
        sig = zoo_artifact(name).signature  # dlbench export writes a dynamic batch
        sidecar = dict(
            sidecar, inputs=[{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in sig]
        )
    ref = ArtifactRef(str(path.resolve()), MINDIR, name, "mindspore", None, sidecar)
    return Artifact(ref, arg, sha256_of(path), sig, sidecar.get("precision", "fp32"), _zoo_ranges(name))
