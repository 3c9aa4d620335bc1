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
module and one line registering it in ``EXPORT_HOPS`` or ``BUILD_TARGETS``.

A build hop also *declares* what the harness derives from it (the format it
writes, where it builds, whether it needs its own process, its precisions
and the options it reads), so no harness code tests a target's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import comma_list, flag
from dlbench.core.registry import Registry


class ConversionError(UserError):
    """A hop refused its input (a graph it cannot convert, an option it lacks): bad input,
    one line, exit 2 at the CLI.  A crash inside a converter stays an ordinary exception,
    which the caller records as that conversion's failure."""


DEFAULT_OPSET = 17


@dataclass
class ExportOptions:
    """What an export hop reads; each field ``dlbench export`` sets declares its flag."""

    format: str = flag(
        "--format",
        default="onnx",
        choices=("onnx", "mindir"),
        help="onnx (default) or mindir (MindSpore only: what Ascend loads)",
    )
    opset: int = flag("--opset", default=DEFAULT_OPSET, type=int, help="ONNX opset (default {default})")
    dynamic_batch: bool = flag(
        "--dynamic-batch",
        default=True,
        off="--static-batch",
        help="symbolic batch dimension (default)",
        off_help="fixed batch dimension of --batch-size",
    )
    batch_size: int = flag(  # the fixed batch when dynamic_batch is False
        "--batch-size", default=1, type=int, help="the fixed batch with --static-batch (default {default})"
    )
    exporter: str = flag(  # pytorch: torchscript | dynamo
        "--exporter",
        default="torchscript",
        choices=("torchscript", "dynamo"),
        help="PyTorch exporter (dynamo needs onnxscript)",
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BuildOptions:
    """What a build hop reads (each hop declares which: ``BuildHop.options``).  Each
    field a ``dlbench build`` flag sets declares it (``core.flags``); the command
    prefixes its help with the targets that read it."""

    precision: str = "fp32"  # tensorrt: fp32 | fp16 | int8 | best (the request's --precision)
    batch_sizes: tuple[int, ...] = flag(
        "--batch-sizes",
        default=(1, 8, 32),
        type=comma_list(int),
        read=tuple,
        help="profile min,opt,max batch (default {default})",
    )
    workspace_mb: int = flag("--workspace-mb", default=4096, type=int, help="builder workspace")
    timing_cache: str | None = flag(
        "--timing-cache", default=None, help="timing cache file, read if present and written after"
    )
    calib_data: str | None = flag(
        "--calib-data",
        default=None,
        help=".npz with array x (N,C,H,W), or 'digits' (its training split; default: synthetic images)",
    )
    calib_size: int = flag(
        "--calib-size", default=64, type=int, help="synthetic calibration samples (default {default})"
    )
    calib_batch: int = flag("--calib-batch", default=8, type=int, help="calibration batch size")
    calib_cache: str | None = flag(
        "--calib-cache", default=None, help="calibration cache file, read if present and written after"
    )
    # None: chosen by the graph (converters.int8_recipe.choose_mode), and recorded.
    dynamic: bool | None = flag(
        "--dynamic",
        default=None,
        off="--static",
        help="dynamic INT8: weights ahead, activations quantized per batch at run time, no "
        "calibration (default: chosen by the graph: dynamic where it has attention or "
        "recurrent layers, as ONNX Runtime recommends for transformers and RNNs)",
        off_help="static INT8: activation ranges calibrated once (default for graphs without "
        "attention or recurrent layers)",
    )
    per_channel: bool = flag(
        "--per-tensor", default=True, switch=True, invert=True, help="per-tensor weight scales"
    )
    target: str = flag(
        "--target",
        default="cpu",
        choices=("cpu", "tensorrt"),
        help="Q/DQ flavour: cpu (u8 activations, s8 weights; default) or tensorrt (symmetric s8)",
    )
    keep_io_types: bool = flag(
        "--keep-io-types", default=True, negatable=True, help="keep float32 inputs and outputs (default yes)"
    )
    exclude_nodes: tuple[str, ...] = flag(
        "--exclude-nodes",
        default=(),
        type=comma_list(str),
        read=tuple,
        metavar="NAME[,NAME]",
        help="leave these nodes in float (names of the graph after quant_pre_process, as the "
        "per-layer error report prints them)",
    )
    exclude_op_types: tuple[str, ...] = flag(
        "--exclude-op-types",
        default=(),
        type=comma_list(str),
        read=tuple,
        metavar="TYPE[,TYPE]",
        help="leave every node of these op types in float (e.g. Softmax)",
    )
    quantize_op_types: tuple[str, ...] = flag(
        "--quantize-op-types",
        default=(),
        type=comma_list(str),
        read=tuple,
        metavar="TYPE[,TYPE]",
        help="quantize only nodes of these op types (e.g. Conv,MatMul,Gemm: the weighted "
        "layers), everything else stays float; default: every type ONNX Runtime's quantizer handles",
    )
    float_tail: bool = flag(
        "--float-tail",
        default=True,
        negatable=True,
        help="keep fixed-range ops (Softmax, Sigmoid, Tanh, ...) at the graph outputs in float",
    )
    freeze: bool = flag(
        "--freeze",
        default=True,
        negatable=True,
        help="make initializers that are also graph inputs (old exporters) plain weights before "
        "building (default yes); --no-freeze keeps weights you feed at run time as inputs",
    )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("batch_sizes", "exclude_nodes", "exclude_op_types", "quantize_op_types"):
            d[key] = list(getattr(self, key))
        return d


class Hop:
    name: str = ""  # e.g. "pytorch->onnx"
    source: str = ""  # pytorch | tensorflow | mindspore | onnx
    targets: tuple[str, ...] = ()
    precision: str = "fp32"  # what the produced artifact computes in


class ExportHop(Hop, ABC):
    framework: str = ""

    @abstractmethod
    def export(self, model: Any, spec: Any, out: Path, options: ExportOptions) -> dict[str, Any]:
        """Write ``out`` from the loaded native ``model``; return what was used."""

    @staticmethod
    @abstractmethod
    def version() -> dict[str, str]:
        """Versions of the framework and exporter, for the record."""


class BuildHop(Hop, ABC):
    source = "onnx"
    suffix: str = ""  # default output name: model<suffix>
    # The oldest opset the hop's tool reads; an older graph is raised to it first
    # (``onnx_normalize``).  The newest is what the installed runtime loads.
    min_opset: int | None = None
    # The artifact format it writes (harness.formats) and the device it builds for.
    artifact_format: str = "onnx"
    device: str = "cpu"
    # Built in a cell of its own: its library can crash or hang the process, or needs a
    # device context the parent must not hold.
    in_cell: bool = False
    # The inference backend whose availability on this machine gates the build.
    requires_backend: str | None = None
    # What --precision may choose; empty: the hop makes ``precision`` models only.
    precisions: tuple[str, ...] = ()
    # Builds from a source that is not fp32, in the source's own precision.
    from_any_precision: bool = False
    # The BuildOptions fields it reads (besides ``freeze``, which every hop honours).
    options: tuple[str, ...] = ()
    # One line for ``dlbench build --help``.
    summary: str = ""

    def calibrates(self, options: BuildOptions) -> bool:
        """Whether this build needs calibration batches."""
        return False

    def makes(self, precision: str) -> bool:
        """Whether a build of this target can make a ``precision`` model: one of its
        ``--precision`` choices, or its one precision."""
        return precision in self.precisions if self.precisions else precision == self.precision

    def check_source(self, model: Any, label: str, options: BuildOptions) -> None:
        """Raise ConversionError for a source graph this hop cannot build (before any work)."""

    def profile_batch_sizes(
        self, options: BuildOptions, verify: tuple[int, ...], fixed: int | None
    ) -> tuple[int, ...]:
        """The batch sizes the built artifact is verified at; a hop whose artifact takes a
        batch range (an engine profile) narrows them to it, and follows a fixed batch."""
        return verify

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


# framework -> its export hop (importing the module imports the framework: cell only)
EXPORT_HOPS: Registry[ExportHop] = Registry("ONNX exporter")
EXPORT_HOPS.register("pytorch", "dlbench.converters.torch_to_onnx:HOP")
EXPORT_HOPS.register("tensorflow", "dlbench.converters.keras_to_onnx:HOP")
EXPORT_HOPS.register("mindspore", "dlbench.converters.mindspore_to_onnx:HOP")
# --to target -> its build hop (importing one imports no framework)
BUILD_TARGETS: Registry[BuildHop] = Registry("build target")
BUILD_TARGETS.register("tensorrt", "dlbench.converters.onnx_to_tensorrt:HOP")
BUILD_TARGETS.register("int8", "dlbench.converters.onnx_to_int8:HOP")
BUILD_TARGETS.register("fp16", "dlbench.converters.onnx_to_fp16:HOP")


def export_hop(framework: str) -> ExportHop:
    """The export hop for ``framework`` (imports the framework: call it in the cell only)."""
    if framework not in EXPORT_HOPS:
        raise ConversionError(
            f"no ONNX exporter for framework {framework!r}; known: {', '.join(EXPORT_HOPS.names())}"
        )
    return EXPORT_HOPS.get(framework)


def build_hop(target: str) -> BuildHop:
    if target not in BUILD_TARGETS:
        raise ConversionError(
            f"--to {target}: unknown target; choose from {', '.join(BUILD_TARGETS.names())}"
        )
    return BUILD_TARGETS.get(target)


def option_targets() -> dict[str, list[str]]:
    """BuildOptions field -> the targets that read it (help texts and refusals)."""
    out: dict[str, list[str]] = {}
    for name in BUILD_TARGETS.names():
        for option in build_hop(name).options:
            out.setdefault(option, []).append(name)
    return out
