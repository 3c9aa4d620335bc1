"""Conversions orchestrated: each hop of ``dlbench.converters`` (native checkpoint ->
ONNX / MindIR, ONNX -> INT8 / FP16 ONNX or a TensorRT engine) run, then checked
against its source by the comparator, and stored.

The Python API behind ``dlbench export / build / verify``::

    from dlbench.harness import convert as converters
    records = converters.export_checkpoints(converters.ExportRequest(["runs/resnet50/pytorch"]))
    record = converters.build_model(
        converters.BuildRequest("runs/resnet50/pytorch/model.onnx", to="int8"))
    record = converters.verify_files(
        converters.VerifyRequest("runs/resnet50/pytorch", "runs/resnet50/pytorch/model.onnx"))

Each returns the record(s) stored in the results database (``status`` ok,
unverified or failed) and raises ``dlbench.core.errors.UserError`` for bad input.
(The functions are not called ``export``/``build``/``verify`` because those
are this package's modules, and importing a submodule rebinds its name.)
Importing this package imports no framework and not even onnx: the names
below load their modules on first use.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "export_checkpoints": ("dlbench.harness.convert.export", "export"),
    "ExportRequest": ("dlbench.harness.convert.request", "ExportRequest"),
    "build_model": ("dlbench.harness.convert.build", "build"),
    "BuildRequest": ("dlbench.harness.convert.request", "BuildRequest"),
    "verify_files": ("dlbench.harness.verify.command", "verify_files"),
    "VerifyRequest": ("dlbench.harness.verify.command", "VerifyRequest"),
    "ExportOptions": ("dlbench.converters.base", "ExportOptions"),
    "BuildOptions": ("dlbench.converters.base", "BuildOptions"),
}
__all__ = list(_LAZY)


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dlbench.harness.convert' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attr)
