"""The TensorRT build itself, the one place that drives TensorRT's builder: ``dlbench
build``'s hop (``onnx_to_tensorrt``, with its precision paths, calibration and timing
cache) and the bench runner given an ONNX file (``build_in_cell``) share the network
creation and the parse.  Imports TensorRT inside each function, in the process that builds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlbench.converters import tensorrt_runtime as trt_rt
from dlbench.converters.base import BuildOptions, ConversionError
from dlbench.core.atomic import write_bytes


def trt_major(version: str | None) -> int | None:
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        return None


def profile_of(batch_sizes) -> tuple[int, int, int]:
    sizes = sorted(set(int(b) for b in batch_sizes))
    return sizes[0], sizes[len(sizes) // 2], sizes[-1]


def strongly_typed(trt_version: str, model_precision: str) -> bool:
    """TensorRT 11 knows no other way; any version builds a typed model in its own types."""
    major = trt_major(trt_version)
    return model_precision != "fp32" or (major is not None and major >= 11)


def prepare_typed_onnx(
    source: Path, scratch: Path, options: BuildOptions, calibration: list
) -> tuple[Path, str]:
    """For a strongly typed build of an fp32 model: the fp16 / int8 ONNX to build from."""
    from dlbench.converters import onnx_io

    if options.precision == "fp16":
        from dlbench.converters.onnx_to_fp16 import HOP as fp16

        out = scratch / "model.fp16.onnx"
        fp16.build(source, out, BuildOptions(keep_io_types=True))
        how = "float16 ONNX from the fp16 hop (float32 I/O)"
    else:
        from dlbench.converters.onnx_to_int8 import HOP as int8

        out = scratch / "model.int8.onnx"
        int8.build(
            source,
            out,
            BuildOptions(
                **{**options.to_dict(), "target": "tensorrt", "batch_sizes": tuple(options.batch_sizes)}
            ),
            calibration=calibration,
        )
        how = "symmetric int8 Q/DQ ONNX from the int8 hop (target tensorrt)"
    onnx_io.load(out)  # the intermediate must itself be a valid model
    return out, how


def _calibrator(trt, batches, cache_path: str | None, log: dict[str, Any]):
    """An IInt8EntropyCalibrator2 feeding ``batches`` from one device buffer."""

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches = batches
            self.index = 0
            self.buffer = trt_rt.DeviceBuffer(batches[0].nbytes) if batches else None

        def get_batch_size(self):
            return int(self.batches[0].shape[0]) if self.batches else 1

        def get_batch(self, names):
            if self.index >= len(self.batches) or self.buffer is None:
                return None
            self.buffer.upload(self.batches[self.index])
            self.index += 1
            log["calibration_batches"] = self.index
            return [self.buffer.ptr]

        def read_calibration_cache(self):
            if cache_path and os.path.isfile(cache_path):
                log["calibration_cache"] = "reused"
                with open(cache_path, "rb") as fh:
                    return fh.read()
            return None

        def write_calibration_cache(self, cache):
            if cache_path:
                write_bytes(cache_path, bytes(cache))
                log["calibration_cache"] = log.get("calibration_cache") or "written"

    return EntropyCalibrator()


def _parse(trt, network, logger, onnx_path: str):
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(onnx_path):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        first = errors[0].strip().splitlines()[0] if errors else "unknown error"
        raise ConversionError(f"TensorRT's ONNX parser rejects {onnx_path}: {first}")
    return parser


def _network(trt, logger, onnx_path: str, strongly: bool):
    """A builder and its network parsed from the file, strongly typed where asked (TensorRT
    11 is always strongly typed and accepts the flag); the parser comes back too because it
    owns the weights the network points to and must outlive the build."""
    builder = trt.Builder(logger)
    flags = 0
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if strongly and flag is not None:
        flags |= 1 << int(flag)
    network = builder.create_network(flags)
    return builder, network, _parse(trt, network, logger, onnx_path)


def build_in_cell(
    trt,
    logger,
    onnx_path: str | Path,
    *,
    workspace_mb: int,
    tf32: bool,
    shapes: dict[str, Sequence[int]],
    batch_range: tuple[int, int],
) -> tuple[bytes, bool | None]:
    """An engine for a bench cell given an ONNX file: built where it runs, strongly typed
    (the file carries its precision; an fp16 or int8 engine comes from ``dlbench build``'s
    fp16 or Q/DQ file), one profile over the cell's batch range for dynamic inputs (their
    other dimensions from ``--shape``), TF32 only when the cell asks for it.  Returns the
    serialized engine and the TF32 flag as the builder reads it back (None where TensorRT
    has no such flag): the record's math mode."""
    builder, network, parser = _network(trt, logger, str(onnx_path), strongly=True)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)
    tf32_flag = None
    if hasattr(trt.BuilderFlag, "TF32"):
        (config.set_flag if tf32 else config.clear_flag)(trt.BuilderFlag.TF32)
        tf32_flag = bool(config.get_flag(trt.BuilderFlag.TF32))
    profile = builder.create_optimization_profile()
    lo, hi = batch_range
    dynamic = False
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        dims = list(tensor.shape)
        if all(d >= 0 for d in dims):
            continue
        dynamic = True
        full = shapes.get(tensor.name)
        if full is None:
            raise ConversionError(
                f"input {tensor.name!r} has dynamic dimensions {dims}: give them with --shape"
            )
        rest = [int(d) for d in full[1:]]
        profile.set_shape(tensor.name, [lo, *rest], [hi, *rest], [hi, *rest])
    if dynamic:
        config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    del parser
    if serialized is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {onnx_path} (see the log above)")
    return bytes(serialized), tf32_flag


def build_engine(
    source: Path, out: Path, options: BuildOptions, *, model_precision: str, calibration: list, scratch: Path
) -> dict[str, Any]:
    import tensorrt as trt

    strongly = strongly_typed(trt.__version__, model_precision)
    if strongly and options.precision == "best":
        raise ConversionError(
            f"--precision best: TensorRT {trt.__version__} builds this model strongly "
            f"typed, where 'best' (let the builder pick fp16/int8) does not exist; "
            f"choose fp16 or int8"
        )
    onnx_path, prepared = source, None
    if strongly and model_precision == "fp32" and options.precision != "fp32":
        onnx_path, prepared = prepare_typed_onnx(onnx_path, scratch, options, calibration)
    log: dict[str, Any] = {}
    logger = trt.Logger(trt.Logger.WARNING)
    builder, network, parser = _network(trt, logger, str(onnx_path), strongly)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(options.workspace_mb) << 20)

    lo, opt, hi = profile_of(options.batch_sizes)
    profile = builder.create_optimization_profile()
    shapes = {}
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        rest = list(tensor.shape)[1:]
        if any(d < 0 for d in rest):
            raise ConversionError(
                f"input {tensor.name!r} has dynamic non-batch dimensions "
                f"{list(tensor.shape)}; TensorRT needs them fixed"
            )
        shapes[tensor.name] = {"min": [lo, *rest], "opt": [opt, *rest], "max": [hi, *rest]}
        profile.set_shape(
            tensor.name, shapes[tensor.name]["min"], shapes[tensor.name]["opt"], shapes[tensor.name]["max"]
        )
    config.add_optimization_profile(profile)

    cache_path = options.timing_cache
    cache_data = Path(cache_path).read_bytes() if cache_path and Path(cache_path).is_file() else b""
    log["timing_cache"] = ("reused" if cache_data else "new") if cache_path else None
    timing_cache = config.create_timing_cache(cache_data)
    config.set_timing_cache(timing_cache, ignore_mismatch=False)

    tf32 = None
    if hasattr(trt.BuilderFlag, "TF32"):
        if options.precision != "best":
            config.clear_flag(trt.BuilderFlag.TF32)
        tf32 = bool(config.get_flag(trt.BuilderFlag.TF32))
        if options.precision != "best" and tf32:
            raise RuntimeError("TensorRT's builder still reports TF32 on after clearing it")
    if not strongly:
        if options.precision in ("fp16", "best"):
            config.set_flag(trt.BuilderFlag.FP16)
        if options.precision in ("int8", "best"):
            config.set_flag(trt.BuilderFlag.INT8)
            if not calibration:
                raise ConversionError("a TensorRT INT8 build needs calibration batches")
            # TensorRT's calibrator takes one batch size: a short last batch is dropped.
            calib = [b for b in calibration if b.shape[0] == calibration[0].shape[0]]
            log["calibration_samples"] = int(sum(b.shape[0] for b in calib))
            config.int8_calibrator = _calibrator(trt, calib, options.calib_cache, log)
            calib_profile = builder.create_optimization_profile()
            for name, s in shapes.items():
                fixed = [int(calib[0].shape[0]), *s["opt"][1:]]
                calib_profile.set_shape(name, fixed, fixed, fixed)
            config.set_calibration_profile(calib_profile)

    start = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    build_s = time.perf_counter() - start
    del parser
    if serialized is None:
        raise RuntimeError("TensorRT could not build an engine (its log above says why)")
    write_bytes(out, bytes(serialized))
    if cache_path:
        write_bytes(cache_path, bytes(memoryview(config.get_timing_cache().serialize())))

    gpu = trt_rt.device_properties(0)
    sidecar = {
        "format": trt_rt.SIDECAR_FORMAT,
        "tensorrt_version": trt.__version__,
        "gpu": gpu,
        "precision": options.precision,
        "tf32": tf32,
        "model_precision": model_precision,
        "build_path": "strongly-typed" if strongly else "weakly-typed-flags",
        "prepared_onnx": prepared,
        "profile": shapes,
        "workspace_mb": options.workspace_mb,
        "timing_cache": cache_path,
        "calibration_cache": options.calib_cache
        if not strongly and options.precision in ("int8", "best")
        else None,
        "build_log": log,
        "build_s": build_s,
    }
    return {"sidecar": sidecar, "build_s": build_s}
