"""ONNX -> serialized TensorRT engine, through the TensorRT Python API.

The hop builds in whatever process calls it; ``dlbench build`` calls it in a
cell of its own (``harness.convert.tensorrt_cell``), so a builder crash or a
CUDA fault is that build's recorded failure and the parent never imports
TensorRT.  Calibration batches come in as an argument, like every hop's data.

What a build uses, all recorded in the sidecar ``ENGINE.json``:

* one optimization profile, min/opt/max batch from ``--batch-sizes`` (the
  smallest, the middle and the largest given; the other dimensions are the
  ONNX input's own, which must be fixed);
* a workspace limit (``--workspace-mb``);
* a timing cache file, loaded before and saved (merged) after each build, so
  a second build of a similar network skips most tactic timing;
* the precision, by one of two paths chosen from the installed TensorRT
  (recorded as ``build_path``):

  - ``weakly-typed-flags`` (TensorRT 10 with an fp32 ONNX model): builder
    flags FP16 / INT8 / both for ``best``; INT8 calibrates with an
    ``IInt8EntropyCalibrator2`` over the calibration batches given, reading
    and writing a calibration cache file so a rebuild skips calibration;
  - ``strongly-typed`` (TensorRT 11, which removed those flags and the
    calibrator, or any ONNX model that already carries its precision): the
    network is created strongly typed and computes in the types of the ONNX
    graph, so the build cell first converts an fp32 model with the ``fp16``
    hop (float16 weights and compute, float32 I/O) or the ``int8`` hop in its
    TensorRT flavour (symmetric signed int8 Q/DQ, the only kind TensorRT
    accepts), and records which (``prepared_onnx``).  ``best`` needs weak
    typing and is refused on TensorRT 11.

The path is decided from ``tensorrt.__version__`` where the build runs, the
only place that knows it for certain.

TensorRT's builder enables TF32 by default, which would round the inputs of
every float32 matmul and convolution to a 10-bit mantissa on Ampere and
newer.  fp32 engines (and the float32 layers of fp16 and int8 engines) clear
``BuilderFlag.TF32``, so "fp32" means IEEE float32 and the fp32 tolerance
applies; only ``best`` (let the builder pick) keeps it.  The flag as the
builder reads it back is recorded in the sidecar (``tf32``), which the runner
reports as the engine's math mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlbench.converters import tensorrt_runtime as trt_rt
from dlbench.converters.base import BuildHop, BuildOptions, ConversionError
from dlbench.converters.tensorrt_build import build_engine, profile_of, trt_major
from dlbench.core.atomic import scratch as scratch_dir

PRECISIONS = ("fp32", "fp16", "int8", "best")


def missing_packages() -> list[str]:
    """The Python packages a build needs that are not installed (no import)."""
    import importlib.util

    return [
        f"{dist} is not installed (pip install 'dlbench[tensorrt]')"
        for module, dist in (("tensorrt", "tensorrt"), ("cuda", "cuda-python"))
        if importlib.util.find_spec(module) is None
    ]


class OnnxToTensorRT(BuildHop):
    name = "onnx->tensorrt"
    targets = ("tensorrt",)
    min_opset = 9  # TensorRT's ONNX parser reads opset 9 and later
    artifact_format = "tensorrt-engine"
    device = "gpu"
    in_cell = True  # a CUDA context, and a library that can abort the process
    requires_backend = "tensorrt"
    precisions = PRECISIONS
    from_any_precision = True
    options = (
        "precision",
        "batch_sizes",
        "workspace_mb",
        "timing_cache",
        "calib_data",
        "calib_size",
        "calib_batch",
        "calib_cache",
    )
    summary = (
        "a serialized TensorRT engine (NVIDIA GPU, tensorrt and cuda-python), with an "
        "optimization profile over --batch-sizes and a sidecar naming its TensorRT and GPU"
    )

    def calibrates(self, options: BuildOptions) -> bool:
        return options.precision in ("int8", "best")

    def profile_batch_sizes(
        self, options: BuildOptions, verify: tuple[int, ...], fixed: int | None
    ) -> tuple[int, ...]:
        """The engine takes batches inside its profile only; a fixed-batch model's
        profile is that batch."""
        if fixed is not None:
            options.batch_sizes = (fixed,)
        lo, _, hi = profile_of(options.batch_sizes)
        inside = tuple(b for b in verify if lo <= b <= hi)
        return inside if len(inside) >= 2 else tuple(dict.fromkeys((lo, hi)))

    def check_available(self, options: BuildOptions) -> None:
        if options.precision not in PRECISIONS:
            raise ConversionError(f"--precision {options.precision}: choose from {', '.join(PRECISIONS)}")
        major = trt_major(trt_rt.tensorrt_version_here())
        if major is not None and major >= 11 and options.precision == "best":
            raise ConversionError(
                "--precision best: TensorRT 11 builds strongly typed networks only "
                "and dropped the 'best' (weakly typed) mode; choose fp16 or int8"
            )

    def default_out(self, source: Path, options: BuildOptions) -> Path:
        stem = source.name[:-5] if source.name.endswith(".onnx") else source.stem
        return source.with_name(f"{stem}.{options.precision}.plan")

    def output_precision(self, options: BuildOptions) -> str:
        return options.precision

    def build(
        self,
        source: Path,
        out: Path,
        options: BuildOptions,
        *,
        model_precision: str = "fp32",
        calibration: Sequence[Any] | None = None,
        scratch: Path | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Write the serialized engine to ``out``; return the sidecar facts and timings."""
        with scratch_dir("dlbench-trt") as tmp:
            return build_engine(
                Path(source),
                Path(out),
                options,
                model_precision=model_precision,
                calibration=list(calibration or []),
                scratch=Path(scratch or tmp),
            )


HOP = OnnxToTensorRT()
