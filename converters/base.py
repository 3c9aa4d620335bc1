"""The hop interface: one conversion from one format to another, one module each.

Two kinds of hop, because they live in different processes:

* ``ExportHop`` — a native framework's network to ONNX (or MindIR).  It runs
  inside the export cell's child process, where the framework is imported;
  the parent never imports it.  ``export(model, spec, out, options)`` writes
  the raw file and returns what it used (exporter, opset, rewrites, versions).
* ``BuildHop`` — an ONNX file to another artifact (INT8 or FP16 ONNX, a
  TensorRT engine).  ``build(source, out, options)`` runs in the parent for
  the ONNX Runtime hops and in a cell for TensorRT.

A hop never judges its own output, and knows no database, launcher or CLI:
the caller (``harness.convert``) normalizes the file, runs reference and
candidate through the runners, lets the comparator judge and stores the
verdict, so every hop is checked the same way.  Data a hop needs
(calibration batches) comes in as an argument.  Adding a hop is adding a
module and one line to ``EXPORT_HOPS`` or ``BUILD_HOPS``.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError


class ConversionError(UserError):
    """A hop refused its input (a graph it cannot convert, an option it lacks): bad input,
    one line, exit 2 at the CLI.  A crash inside a converter stays an ordinary exception,
    which the caller records as that conversion's failure."""

# framework -> module whose HOP exports it (imported only in the export cell)
EXPORT_HOPS = {
    "pytorch": "dlbench.converters.torch_to_onnx",
    "tensorflow": "dlbench.converters.keras_to_onnx",
    "mindspore": "dlbench.converters.mindspore_to_onnx",
}
# --to target -> module whose HOP builds it (importing one imports no framework)
BUILD_HOPS = {
    "tensorrt": "dlbench.converters.onnx_to_tensorrt",
    "int8": "dlbench.converters.onnx_to_int8",
    "fp16": "dlbench.converters.onnx_to_fp16",
}
DEFAULT_OPSET = 17


@dataclass
class ExportOptions:
    format: str = "onnx"                 # onnx | mindir
    opset: int = DEFAULT_OPSET
    dynamic_batch: bool = True
    batch_size: int = 1                  # the fixed batch when dynamic_batch is False
    exporter: str = "torchscript"        # pytorch: torchscript | dynamo

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BuildOptions:
    precision: str = "fp32"              # tensorrt: fp32 | fp16 | int8 | best
    batch_sizes: tuple[int, ...] = (1, 8, 32)      # tensorrt profile: min, opt, max
    workspace_mb: int = 4096
    timing_cache: str | None = None
    calib_data: str | None = None        # .npz with x (N, C, H, W)
    calib_size: int = 64                 # synthetic calibration samples
    calib_batch: int = 8
    calib_cache: str | None = None
    dynamic: bool = False                # int8: dynamic quantization instead of static
    per_channel: bool = True
    target: str = "cpu"                  # int8 QDQ flavour: cpu (u8/s8) | tensorrt (s8/s8)
    keep_io_types: bool = True           # fp16: float32 inputs and outputs
    exclude_nodes: tuple[str, ...] = ()      # int8: nodes left in float, by name
    exclude_op_types: tuple[str, ...] = ()   # int8: op types left in float
    quantize_op_types: tuple[str, ...] = ()  # int8: only these op types (empty: the quantizer's)
    float_tail: bool = True              # int8: fixed-range ops at the outputs stay float
    freeze: bool = True                  # initializers that are also graph inputs: fixed

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("batch_sizes", "exclude_nodes", "exclude_op_types", "quantize_op_types"):
            d[key] = list(getattr(self, key))
        return d


class Hop(ABC):
    name: str = ""           # e.g. "pytorch->onnx"
    source: str = ""         # pytorch | tensorflow | mindspore | onnx
    targets: tuple[str, ...] = ()
    precision: str = "fp32"  # what the produced artifact computes in


class ExportHop(Hop):
    framework: str = ""

    @abstractmethod
    def export(self, model: Any, spec: Any, out: Path, options: ExportOptions) -> dict[str, Any]:
        """Write ``out`` from the loaded native ``model``; return what was used."""

    @staticmethod
    @abstractmethod
    def version() -> dict[str, str]:
        """Versions of the framework and exporter, for the record."""


class BuildHop(Hop):
    source = "onnx"
    suffix: str = ""         # default output name: model<suffix>
    # The oldest opset the hop's tool reads; an older graph is raised to it first
    # (``onnx_normalize``).  The newest is what the installed runtime loads.
    min_opset: int | None = None

    def check_available(self, options: BuildOptions) -> None:
        """Raise UserError if this machine cannot run the hop (before any work)."""

    def default_out(self, source: Path, options: BuildOptions) -> Path:
        stem = source.name[:-5] if source.name.endswith(".onnx") else source.stem
        return source.with_name(stem + self.suffix)

    def output_precision(self, options: BuildOptions) -> str:
        return self.precision

    @abstractmethod
    def build(self, source: Path, out: Path, options: BuildOptions) -> dict[str, Any]:
        """Write ``out`` from the ONNX file ``source``; return what was used."""


def export_hop(framework: str) -> ExportHop:
    """The export hop for ``framework`` (imports the framework: call it in the cell only)."""
    try:
        return importlib.import_module(EXPORT_HOPS[framework]).HOP
    except KeyError:
        raise ConversionError(f"no ONNX exporter for framework {framework!r}; known: "
                        f"{', '.join(EXPORT_HOPS)}") from None


def build_hop(target: str) -> BuildHop:
    try:
        return importlib.import_module(BUILD_HOPS[target]).HOP
    except KeyError:
        raise ConversionError(f"--to {target}: unknown target; choose from "
                        f"{', '.join(BUILD_HOPS)}") from None
