"""Native models for inference: load a checkpoint, run a batch, in each framework.

One module per framework with the same three functions, used by the export
verifier (native vs ONNX) and by the native inference backends:

* ``load(spec, checkpoint) -> model`` — build ``spec`` and load the weights,
  in eval mode (BN uses its moving statistics);
* ``to_device(model, device) -> model`` and ``predict(model, x) -> np.ndarray``
  where ``x`` is one array, or a tuple of arrays in ``spec.inputs`` order
  (token models), always as the spec describes them: images channels-first
  (NCHW) float32 (a framework whose network is channels-last converts
  inside), token ids in their integer dtype.

``checkpoint_manifest`` reads what ``dlbench train`` wrote next to a checkpoint.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.frameworks import get_framework

SUFFIXES = {".pt": "pytorch", ".pth": "pytorch", ".keras": "tensorflow", ".ckpt": "mindspore"}
MANIFEST = "manifest.json"


def module(framework: str) -> ModuleType:
    get_framework(framework)  # an unknown one is a UserError naming the choices
    return importlib.import_module(f"dlbench.models.native.{framework}")


def checkpoint_manifest(
    path: str | Path, framework: str | None = None, model: str | None = None
) -> tuple[Path, dict[str, Any]]:
    """(checkpoint file, manifest) for a manifest, a run directory or a bare checkpoint.

    A bare checkpoint a user brings needs ``model`` (a zoo architecture); the
    framework follows from the suffix unless given.  A given ``model`` also overrides
    a manifest's: silently exporting the architecture it trained as would hand the user
    a different network than the one asked for.
    """
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    if path.is_dir():
        path = path / MANIFEST
        if not path.is_file():
            raise UserError(f"{path.parent}: no {MANIFEST} here (is it a dlbench train output?)")
    if path.name == MANIFEST or path.suffix == ".json":
        try:
            manifest = json.loads(path.read_text())
            checkpoint = path.parent / manifest["checkpoint"]
            manifest["model"], manifest["framework"]
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{path}: not a dlbench checkpoint manifest ({exc})") from None
        if not checkpoint.is_file():
            raise UserError(f"{path}: its checkpoint {checkpoint.name} is missing")
        if model is not None and model != manifest["model"]:
            # The user's --model wins over what trained it (a teacher-forced GNMT checkpoint
            # into its greedy decoder); weights that do not fit fail the load, by name.
            manifest = {**manifest, "model": model, "trained_as": manifest["model"]}
        return checkpoint, manifest
    framework = framework or SUFFIXES.get(path.suffix)
    if framework is None:
        raise UserError(f"{path}: cannot tell the framework from '{path.suffix}'; pass --framework")
    if model is None:
        raise UserError(f"{path}: a checkpoint without a manifest needs --model")
    return path, {"model": model, "framework": framework, "checkpoint": path.name}
