"""torchvision beside the CPU build of torch (imports torch): what lets timm and
transformers import in a cell when PyPI's torchvision was built for the CUDA torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def torchvision_importable() -> None:
    """Let torchvision's Python parts import when its compiled ops cannot load.

    PyPI's torchvision wheels are linked against the CUDA build of torch; beside the CPU
    build its ``_C`` library fails to load, torchvision carries on without its ops
    (``extension._has_ops()`` is False), then registers fake kernels for ``nms`` and
    ``qnms`` by name and fails because those operators were never defined.  Defining
    their schemas (no kernels) lets the import finish; the models, transforms and
    timm's layers are plain PyTorch.  The detection ops stay absent, so a model that
    calls them fails with torch's "no kernel" error in its cell, which is recorded."""
    import importlib.util

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    try:
        torch.ops.torchvision.nms  # noqa: B018 - present when the ops library loaded
        return
    except (AttributeError, RuntimeError):
        pass
    compiled = sorted(Path(spec.origin).parent.glob("_C*.so"))
    try:
        if compiled:
            torch.ops.load_library(str(compiled[0]))
            return
    except OSError:
        pass
    lib = torch.library.Library("torchvision", "DEF")  # noqa: TOR901 - schemas only
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _KEEP.append(lib)  # the definitions live as long as the library object


_KEEP: list[Any] = []
