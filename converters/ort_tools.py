"""ONNX Runtime's Python tools (the quantizer's shape inference, symbolic shape inference)
without PyTorch.

``onnxruntime/tools/__init__.py`` imports torch whenever torch is installed, for one
helper (``infer_input_info``) that exporting from PyTorch uses.  dlbench never calls it,
yet every process that quantizes a graph or infers symbolic shapes paid a PyTorch import
for it: 1.5 to 3.5 s per ``dlbench build --to int8`` on a 2-core machine, and a framework
in a parent process that must stay framework-free.  A stand-in module under that name,
placed before ``onnxruntime.tools`` is first imported, keeps PyTorch out.
"""

from __future__ import annotations

import sys
import types

_HELPERS = "onnxruntime.tools.pytorch_export_helpers"


def without_torch() -> None:
    """Call before the first import of anything under ``onnxruntime.tools`` (or the
    quantizer, which imports it).  Once the package is imported it changes nothing."""
    if "onnxruntime.tools" in sys.modules or _HELPERS in sys.modules:
        return
    stand_in = types.ModuleType(_HELPERS, "dlbench's stand-in: onnxruntime.tools without PyTorch")

    def infer_input_info(*_args, **_kwargs):
        raise RuntimeError(f"{_HELPERS} is dlbench's stand-in (converters/ort_tools.py): not available")

    stand_in.infer_input_info = infer_input_info  # type: ignore[attr-defined]
    sys.modules[_HELPERS] = stand_in
