"""Artifact formats: each declared once, everything else derived.

A format says how a file is recognized (its content first, its suffixes
second), which backend runs it when none is named (verify, eval, the
pipeline), whether the artifact carries its own precision (a built INT8 ONNX
file runs as INT8; a checkpoint runs in whatever precision the cell asks),
and how the resolver loads it.  Before this module the same facts were
written in the resolver, in verify, in eval, in the bench planner and in the
pipeline, and two of the copies had drifted.

Adding a format is one ``FORMATS.register`` call (from a plugin, too: see
``dlbench.core.registry``); the resolver and its refusals read
the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.converters.tensorrt_runtime import ENGINE_SUFFIXES
from dlbench.core.frameworks import NAMES
from dlbench.core.registry import Registry, resolve
from dlbench.models.native import SUFFIXES as CHECKPOINT_SUFFIX_FRAMEWORKS

ONNX = "onnx"
TRT_ENGINE = "tensorrt-engine"
MINDIR = "mindir"
ZOO = "zoo"  # a zoo model name: the native network, random weights
CHECKPOINT = "{}-checkpoint"  # a `dlbench train` output, per framework
USER_MODEL = "{}-model"  # a user's own model file or code (harness.usermodel)
NATIVE_FRAMEWORKS = NAMES


def checkpoint_format(framework: str) -> str:
    return CHECKPOINT.format(framework)


def user_format(framework: str) -> str:
    return USER_MODEL.format(framework)


# (path, label, shapes, inputs, timeout) -> harness.bench.artifacts.Artifact
Loader = Callable[..., Any]


@dataclass(frozen=True)
class ArtifactFormat:
    name: str
    description: str
    suffixes: tuple[str, ...] = ()
    # The backend that runs it when the user names none (verify, eval, the pipeline).
    default_backend: str | None = None
    # The precision is fixed when the artifact is made: a backend runs it as built.
    own_precision: bool = False
    # How the resolver reads a file of this format: a callable or "module:function";
    # None for formats that are not one file (a zoo name, a checkpoint, a user's model).
    loader: Loader | str | None = None
    # A look at the file's first bytes, tried before any suffix (a model.bin that is ONNX).
    sniff: Callable[[bytes], bool] | None = None

    def load(self, path: Path, label: str, **context: Any) -> Any:
        loader = resolve(self.loader) if isinstance(self.loader, str) else self.loader
        if loader is None:
            raise TypeError(f"format {self.name} has no file loader")
        return loader(path, label, **context)


FORMATS: Registry[ArtifactFormat] = Registry("artifact format")


def _looks_like_onnx(head: bytes) -> bool:
    """ONNX's ModelProto serializes ir_version (field 1, a small varint) first, then a
    string or message field: ``08 <1..31> (12|1a|22|28|32|3a)``."""
    return (
        len(head) >= 3
        and head[0] == 0x08
        and 1 <= head[1] < 32
        and head[2] in (0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A)
    )


FORMATS.register(
    ONNX,
    ArtifactFormat(
        ONNX,
        "an ONNX model (any exporter; built INT8/FP16 files keep their precision)",
        (".onnx",),
        "onnxruntime",
        True,
        "dlbench.harness.bench.loaders:load_onnx",
        _looks_like_onnx,
    ),
)
FORMATS.register(
    TRT_ENGINE,
    ArtifactFormat(
        TRT_ENGINE,
        "a serialized TensorRT engine with the JSON sidecar dlbench build writes",
        ENGINE_SUFFIXES,
        "tensorrt",
        True,
        "dlbench.harness.bench.loaders:load_engine",
    ),
)
FORMATS.register(
    MINDIR,
    ArtifactFormat(
        MINDIR,
        "a MindSpore MindIR graph (its inputs in a .json sidecar, or a user's own graph)",
        (".mindir",),
        "mindspore",
        True,
        "dlbench.harness.bench.loaders:load_mindir",
    ),
)
FORMATS.register(ZOO, ArtifactFormat(ZOO, "a zoo model name: the native network with seeded random weights"))
for _fw in NATIVE_FRAMEWORKS:
    FORMATS.register(
        checkpoint_format(_fw),
        ArtifactFormat(
            checkpoint_format(_fw),
            f"a 'dlbench train' output of {_fw}",
            tuple(s for s, f in CHECKPOINT_SUFFIX_FRAMEWORKS.items() if f == _fw),
            _fw,
        ),
    )
    FORMATS.register(
        user_format(_fw),
        ArtifactFormat(
            user_format(_fw), f"a user's own {_fw} model (a file or --model-from code)", default_backend=_fw
        ),
    )


def default_backend(name: str) -> str | None:
    return FORMATS.get(name).default_backend if name in FORMATS else None


def has_own_precision(name: str) -> bool:
    return name in FORMATS and FORMATS.get(name).own_precision


def file_formats() -> list[ArtifactFormat]:
    """The formats the resolver reads as one file, in declaration order."""
    return [f for f in FORMATS.all() if f.loader is not None]


def by_name(path: str | Path) -> ArtifactFormat | None:
    """The file format a path's suffix names (the pipeline names files before they exist)."""
    name = str(path)
    return next((f for f in file_formats() if name.endswith(f.suffixes) and f.suffixes), None)


def recognize(path: Path) -> ArtifactFormat | None:
    """The file format of an existing file: by content where a format can tell, then by
    suffix.  None: not one of the declared file formats."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        head = b""
    for fmt in file_formats():
        if fmt.sniff is not None and fmt.sniff(head):
            return fmt
    return by_name(path)
