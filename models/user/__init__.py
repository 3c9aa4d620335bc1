"""Models the user brings: a framework's own self-describing file, or code that builds one.

A file is recognized from its content, not its suffix: a ``.pt`` may be a
TorchScript archive or a torch.export program (each describes its network
on its own), or a ``torch.save`` pickle (a state_dict, which needs the
architecture from elsewhere).  Only the formats below carry the network; a
file that is none of them is refused with what it was recognized as, so the
user learns why.  Nothing here imports a framework: recognition happens in
the parent, loading in the cell (``models.user.<framework>``).

``--model-from MODULE:CALLABLE`` or ``FILE.py:CALLABLE`` names code that
returns a framework model object; the framework is whatever the object is,
found in the cell that calls it.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.frameworks import NAMES

# kind -> (framework, what the user is told it is)
KINDS: dict[str, tuple[str | None, str]] = {
    "torchscript": ("pytorch", "a TorchScript archive (torch.jit.save)"),
    "torch-export": ("pytorch", "a torch.export program (torch.export.save)"),
    "keras": ("tensorflow", "a Keras 3 model file (model.save, .keras)"),
    "keras-h5": ("tensorflow", "a Keras HDF5 model (model.save to .h5)"),
    "savedmodel": ("tensorflow", "a TensorFlow SavedModel directory"),
    "mindir": ("mindspore", "a MindSpore MindIR graph (mindspore.export)"),
    "code": (None, "a model built by code (--model-from)"),
    "hub": (None, "a model by name from a library (models.user.hub)"),
}
FRAMEWORKS = NAMES
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_CALLABLE = re.compile(r"[A-Za-z_][\w.]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Source:
    """Where a user's model comes from; what a cell needs to load it again."""

    kind: str
    framework: str | None
    path: str | None = None  # the file or directory, absolute
    model_from: str | None = None  # MODULE:CALLABLE, /abs/FILE.py:CALLABLE, or a hub's PREFIX:NAME
    weights: str | None = None  # a state file loaded into the code's model

    @property
    def name(self) -> str:
        """The model's name in records: the file's stem, or the code's module and callable.

        A callable's name alone would merge models: factories are called ``build`` or
        ``create_model`` in every file, so ``a.py:build`` is ``a_build``, as ``timm:`` and
        ``torchvision:`` prefix theirs."""
        if self.kind == "hub":
            return record_name(self.model_from or "")
        if self.model_from:
            target, _, func = self.model_from.rpartition(":")
            module = Path(target).stem if target.endswith(".py") else target.rpartition(".")[2]
            return _UNSAFE.sub("_", f"{module}_{func.rpartition('.')[2]}")
        p = Path(self.path)
        stem = p.name.split(".")[0] if p.is_file() else p.name
        return stem or p.name

    @property
    def what(self) -> str:
        return KINDS[self.kind][1]

    @property
    def label(self) -> str:
        if self.kind == "hub":
            return str(self.model_from)
        return f"--model-from {self.model_from}" if self.model_from else str(self.path)

    @property
    def built(self) -> bool:
        """Code builds the network (``--model-from``, a hub's name): no model file holds it,
        so trained weights are saved on their own, as ``--weights`` for the same code."""
        return self.kind in ("code", "hub")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Source:
        return cls(**d)


def record_name(spec: str) -> str:
    """The model's name in records and file names: the prefix keeps ``timm:resnet18`` and
    ``torchvision:resnet18`` apart, and a directory's last part names an ``hf:`` model."""
    prefix, _, name = spec.partition(":")
    tail = os.path.basename(name.rstrip("/")) or name
    return f"{prefix}_{_UNSAFE.sub('_', tail).strip('_') or 'model'}"


def _zip_names(path: Path) -> list[str] | None:
    try:
        with zipfile.ZipFile(path) as z:
            return z.namelist()
    except (zipfile.BadZipFile, OSError):
        return None


def _zip_kind(names: list[str]) -> str | None:
    # torch archives keep everything under one top folder; Keras files do not.
    tails = {n.partition("/")[2] for n in names}
    if "archive_format" in tails or any(t.startswith("models/") and t.endswith(".json") for t in tails):
        return "torch-export"
    if "constants.pkl" in tails and any(t.startswith("code/") for t in tails):
        return "torchscript"
    if {"config.json", "metadata.json"} <= set(names):
        return "keras"
    return None


def _h5_is_keras_model(path: Path) -> bool | None:
    """True/False from the file's ``model_config`` attribute; None without h5py."""
    try:
        import h5py
    except ImportError:
        return None
    try:
        with h5py.File(path, "r") as f:
            return "model_config" in f.attrs
    except OSError:
        return False


def sniff(path: str | Path) -> Source | None:
    """The user format ``path`` holds, or None when it is none of them."""
    p = Path(path)
    if p.is_dir():
        if (p / "saved_model.pb").is_file() or (p / "saved_model.pbtxt").is_file():
            return _source("savedmodel", p)
        return None
    if not p.is_file():
        return None
    names = _zip_names(p)
    if names is not None:
        kind = _zip_kind(names)
        return _source(kind, p) if kind else None
    with open(p, "rb") as fh:
        head = fh.read(8)
    if head == HDF5_MAGIC and _h5_is_keras_model(p) is not False:
        return _source("keras-h5", p)
    if p.suffix == ".mindir":  # a protobuf: only MindSpore's own parser can tell
        return _source("mindir", p)
    return None


def _source(kind: str, p: Path) -> Source:
    return Source(kind, KINDS[kind][0], str(p.resolve()))


def what_is(path: str | Path) -> str:
    """What a file that is no model format was recognized as, for the one-line refusal."""
    p = Path(path)
    if p.is_dir():
        return "a directory without saved_model.pb (not a SavedModel)"
    names = _zip_names(p)
    if names is not None:
        tails = {n.partition("/")[2] for n in names}
        if "data.pkl" in tails:
            return (
                "a torch.save pickle (a state_dict or a pickled module: it holds weights, "
                "not the network's code; give --model ZOO_NAME, --model-from "
                "MODULE:CALLABLE --weights FILE, or save it with torch.jit.save or "
                "torch.export.save)"
            )
        return f"a zip archive ({len(names)} entries) that is no TorchScript, torch.export or .keras file"
    with open(p, "rb") as fh:
        head = fh.read(16)
    if p.suffix == ".py":
        return f"Python source: give --model-from {p}:CALLABLE (a function returning the model)"
    if head[:8] == HDF5_MAGIC:
        return "an HDF5 file without a Keras model_config (weights only?)"
    if not head:
        return "an empty file"
    return f"a file of {p.stat().st_size} bytes in no format dlbench knows"


def from_code(spec: str, weights: str | None = None) -> Source:
    """``--model-from`` checked for its form only; importing happens in the cell."""
    target, sep, func = spec.rpartition(":")
    if not sep or not target or not _CALLABLE.fullmatch(func):
        raise UserError(f"--model-from {spec}: expected MODULE:CALLABLE or FILE.py:CALLABLE")
    if target.endswith(".py"):
        if not os.path.isfile(target):
            raise UserError(f"--model-from {spec}: no such file {target}")
        target = os.path.abspath(target)
    elif not all(_CALLABLE.fullmatch(part) for part in target.split(".")):
        raise UserError(f"--model-from {spec}: {target!r} is neither a module name nor a .py file")
    if weights is not None and not os.path.exists(weights):
        raise UserError(f"--weights {weights}: no such file")
    return Source("code", None, None, f"{target}:{func}", os.path.abspath(weights) if weights else None)


def signature_json(inputs, outputs, notes=()) -> dict[str, Any]:
    """What a probe reports: inputs as dicts, output names (None: known only after a run)."""
    return {
        "inputs": [dict(i) for i in inputs],
        "outputs": list(outputs) if outputs else None,
        "notes": list(notes),
    }


def dumps(source: Source) -> str:
    return json.dumps(source.to_dict(), sort_keys=True)
