"""What ``dlbench bench ARTIFACT`` names, resolved in the parent before any cell runs.

* ``model.onnx`` — any ONNX model (validated here with the ``onnx``
  package: parse, known operators, input signature);
* ``model.plan`` / ``.engine`` / ``.trt`` — a TensorRT engine, with the JSON
  sidecar ``dlbench build`` writes next to it (``model.plan.json``: TensorRT
  version, GPU, precision, profile, source ONNX; see
  ``converters.tensorrt_runtime``);
* ``model.mindir`` — a MindSpore graph (sidecar ``model.mindir.json`` with
  ``inputs``);
* a ``dlbench train`` output directory, its ``manifest.json``, or a bare
  checkpoint (``.pt``, ``.keras``, ``.ckpt``, with ``--model``) — the native
  network in its framework;
* a user's own model in a self-describing format (TorchScript, torch.export,
  ``.keras``, Keras HDF5, SavedModel: ``models.user``), or ``--model-from``
  code — probed once in its framework's cell (``harness.usermodel``);
* a zoo model name (``resnet50``) — the native network with seeded random
  weights.

The model's name in records is the zoo name when known (a manifest next to
the file, or the ONNX metadata key ``dlbench.model``), else the file's stem.
For a zoo model's ONNX file the spec also sizes the dimensions the graph
leaves dynamic besides the batch (a token model's sequence length), unless
the user gives ``--shape``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness import formats
from dlbench.harness.backends.base import ArtifactRef, TensorInfo
from dlbench.harness.formats import ZOO, checkpoint_format, user_format
from dlbench.models.native import SUFFIXES as NATIVE_SUFFIXES

CHECKPOINT_SUFFIXES = tuple(NATIVE_SUFFIXES)


@dataclass
class Artifact:
    ref: ArtifactRef
    label: str  # as the user typed it
    sha256: str | None = None
    signature: list[TensorInfo] | None = None  # None: only the engine knows (TensorRT plans)
    precision: str | None = None  # the artifact's own, where it has one
    graph_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    onnx_model: Any = None  # the parsed ModelProto, for FLOP counting
    notes: list[str] = field(default_factory=list)
    # --shape values used when the user gives none: a zoo model's own sizes for
    # the dimensions its graph leaves dynamic (a token model's sequence length).
    default_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    default_shapes_note: str | None = None  # what the records say when they are used

    @property
    def format(self) -> str:
        return self.ref.format

    @property
    def own_precision(self) -> str | None:
        """The precision the file was made in, where its format fixes one (a built INT8
        ONNX file, an engine); None where the cell chooses (a checkpoint, a zoo network)."""
        return (self.precision or "fp32") if formats.has_own_precision(self.format) else None

    @property
    def user(self) -> bool:
        """A user's own native model (``harness.usermodel``), not a zoo network."""
        return bool(self.ref.framework) and self.ref.format == user_format(self.ref.framework)

    def shapes_for(self, shapes: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
        """The user's --shape, else the artifact's own sizes for its dynamic dimensions,
        except where an --input file (a read ``GivenInput``) gives the shape itself."""
        return shapes or {
            k: v for k, v in self.default_shapes.items() if k not in given or given[k].file is None
        }

    def identity(self) -> dict[str, Any]:
        d = {"format": self.ref.format, "path": self.ref.path, "model": self.ref.model, "sha256": self.sha256}
        if self.user:
            d["user_source"] = self.ref.meta["source"]  # --model-from and --weights
            if self.ref.meta.get("weights"):  # a model by name: pretrained, or random
                d["weights"] = self.ref.meta["weights"]
        return d


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def neighbour_manifest(path: Path) -> dict[str, Any]:
    manifest = path.parent / "manifest.json"
    if manifest.is_file():
        try:
            return json.loads(manifest.read_text())
        except ValueError:
            return {}
    return {}


def resolve(
    arg: str,
    model: str | None = None,
    framework: str | None = None,
    *,
    shapes: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    timeout: float | None = None,
    weights: str | None = None,
) -> Artifact:
    """The one resolver: what a path (or zoo name) given to bench, verify or eval is.

    ``shapes`` and ``inputs`` (--shape, --input) size a user's model whose file does
    not record its input shapes; ``weights`` fill a model by name, and are refused for
    anything else (``weights_for``: the one check every command's --weights passes)."""
    from dlbench.models import user

    if weights:
        weights = weights_for([arg], None, weights)[arg]
    path = Path(arg)
    if not path.exists():
        from dlbench.models.registry import list_models
        from dlbench.models.user import hub

        if arg in list_models():
            return zoo_artifact(arg)
        named = hub.parse(arg)
        if named is not None:
            return user_artifact(replace(named, weights=weights), arg, shapes, inputs, timeout)
        raise UserError(
            f"{arg}: no such file or directory, not a zoo model (known: {', '.join(list_models())}), "
            f"and not a model by name ({hub.prefixes()})"
        )
    fmt = formats.recognize(path) if path.is_file() else None
    if fmt is not None:
        return fmt.load(path, arg, shapes=shapes, inputs=inputs, timeout=timeout)
    manifest = path.suffix == ".json" or (path.is_dir() and (path / "manifest.json").is_file())
    if model is None and not manifest:
        source = user.sniff(path)
        if source is not None:
            return user_artifact(source, arg, shapes, inputs, timeout)
        raise UserError(
            f"{arg}: {user.what_is(path)}; dlbench reads {_file_formats()}, "
            f"TorchScript, torch.export (.pt2), .keras, Keras .h5, "
            f"SavedModel directories and 'dlbench train' outputs"
        )
    if path.is_dir() or path.suffix in CHECKPOINT_SUFFIXES + (".json",):
        return _checkpoint(path, arg, model, framework)
    raise UserError(
        f"{arg}: cannot tell what this is from '{path.suffix}' (give {_file_formats()}, "
        f"a 'dlbench train' output or a zoo model name)"
    )


def weights_for(args: Sequence[str], model_from: str | None, weights: str | None) -> dict[str, str]:
    """``--weights``' taker among ``args``: ``--model-from``'s model when given (its
    resolver takes them), else the one model by name (``timm:NAME`` ...), whose builder
    makes the architecture the file's state fills; refused where none or two could."""
    from dlbench.models.user import hub

    if not weights or model_from:
        return {}
    named = [a for a in args if not Path(a).exists() and hub.parse(a) is not None]
    if len(named) != 1:
        which = f"{len(named)} models by name ({', '.join(named)})" if named else "none"
        raise UserError(
            f"--weights {weights}: it loads into a --model-from model or one model by name "
            f"({hub.prefixes()}); the models given hold {which}"
        )
    if not os.path.isfile(weights):
        raise UserError(f"--weights {weights}: no such file")
    return {named[0]: os.path.abspath(weights)}


def _file_formats() -> str:
    """The declared file formats with their suffixes, for the refusals above."""
    return ", ".join(
        f"{f.name} ({'/'.join(f.suffixes)})" if f.suffixes else f.name for f in formats.file_formats()
    )


def resolve_code(
    model_from: str,
    weights: str | None = None,
    *,
    shapes: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> Artifact:
    """``--model-from MODULE:CALLABLE`` (with ``--weights``): the model its code builds."""
    from dlbench.models.user import from_code

    source = from_code(model_from, weights)
    return user_artifact(source, source.label, shapes, inputs, timeout)


def user_artifact(source, arg: str, shapes, inputs, timeout) -> Artifact:
    from dlbench.harness import usermodel
    from dlbench.harness.bench.given import read_all

    probed = usermodel.probe(source, timeout)
    files = {k: (g.shape, g.dtype) for k, g in read_all(inputs).items() if g.file is not None}
    signature = usermodel.complete(source, probed, dict(shapes or {}), files)
    ref = usermodel.artifact_ref(source, probed, signature)
    hashed = source.path or source.weights
    sha = sha256_of(Path(hashed)) if hashed and Path(hashed).is_file() else None
    ranges = {k: (int(v[0]), int(v[1])) for k, v in (probed.get("ranges") or {}).items()}
    art = Artifact(ref, arg, sha, signature, None, ranges)
    art.notes += [f"{arg}: {n}" for n in probed.get("notes") or []]
    examples = probed.get("example_shapes") or {}
    if examples:  # a torch.export program's (a hub's) example inputs size what is dynamic
        art.default_shapes = {k: tuple(v) for k, v in examples.items()}
        dims = ", ".join(f"{k}=" + "x".join(["N", *map(str, v[1:])]) for k, v in examples.items())
        art.default_shapes_note = (
            f"dynamic dimensions sized from the model's example inputs "
            f"({dims}, N the batch size); --shape overrides"
        )
    return art


def zoo_artifact(name: str) -> Artifact:
    from dlbench.models.registry import get_model

    spec = get_model(name)
    sig = [TensorInfo(i.name, i.dtype, (None, *i.shape)) for i in spec.inputs]
    return Artifact(ArtifactRef(None, ZOO, spec.name), name, None, sig, None, spec_ranges(spec))


def spec_ranges(spec) -> dict[str, tuple[int, int]]:
    """Token inputs' value ranges from the zoo spec (an embedding's table size), the
    native backends' counterpart of ``onnxinfo.embedding_ranges``; and the image's
    extent for inputs that hold its boxes (Mask R-CNN's ``rois``: ``bench.inputs``
    fills them with valid boxes, not noise)."""
    from dlbench.models.synthetic import box_ranges

    return {**{i.name: tuple(i.int_range) for i in spec.inputs if i.int_range}, **box_ranges(spec)}


def _checkpoint(path: Path, arg: str, model: str | None, framework: str | None = None) -> Artifact:
    from dlbench.models.native import checkpoint_manifest
    from dlbench.models.registry import get_model

    checkpoint, manifest = checkpoint_manifest(path, framework, model)
    spec = get_model(manifest["model"])
    framework = manifest["framework"]
    sig = [TensorInfo(i.name, i.dtype, (None, *i.shape)) for i in spec.inputs]
    ref = ArtifactRef(
        str(checkpoint.resolve()),
        checkpoint_format(framework),
        spec.name,
        framework,
        str(checkpoint.resolve()),
        {
            k: manifest.get(k)
            for k in ("run_id", "steps", "framework_version", "precision", "created_at")
            if k in manifest
        },
    )
    return Artifact(ref, arg, sha256_of(checkpoint), sig, None, spec_ranges(spec))
