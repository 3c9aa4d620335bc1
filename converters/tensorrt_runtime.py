"""TensorRT engines: the sidecar contract, and the CUDA helpers a build needs.

An engine only runs on the GPU model and TensorRT version that built it, so
``dlbench build`` writes ``ENGINE.json`` next to ``ENGINE`` (TensorRT
version, GPU name and compute capability, precision, profile, build path)
and ``check_sidecar`` refuses an engine elsewhere with that reason — in the
parent from the machine fingerprint (``harness.backends.tensorrt``), before
any process starts, and again in the runner from what TensorRT and CUDA
report.  Engines run through that one runner, for benchmarks and for
verification alike.  Device memory and copies (the INT8 calibrator's batches)
come from cuda-python (NVIDIA's bindings, wheels only; pycuda would need a
CUDA toolkit to compile).  ``tensorrt`` and ``cuda`` are imported inside the
functions that need them, so this module loads on any machine.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from dlbench.converters.base import ConversionError

SIDECAR_FORMAT = "dlbench-tensorrt-engine/1"
ENGINE_SUFFIXES = (".plan", ".engine", ".trt")


def sidecar_path(engine: str | Path) -> Path:
    engine = Path(engine)
    return engine.with_name(engine.name + ".json")


def read_sidecar(engine: str | Path) -> dict[str, Any]:
    path = sidecar_path(engine)
    if not path.is_file():
        raise ConversionError(
            f"{engine}: no {path.name} next to it, so nothing says which GPU and "
            f"TensorRT version built it; rebuild it with 'dlbench build --to tensorrt'"
        )
    try:
        meta = json.loads(path.read_text())
    except ValueError as exc:
        raise ConversionError(f"{path}: not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != SIDECAR_FORMAT:
        raise ConversionError(f"{path}: not a dlbench engine sidecar (format {SIDECAR_FORMAT})")
    return meta


def tensorrt_version_here() -> str | None:
    """The installed TensorRT's version, from package metadata (no import)."""
    import importlib.metadata

    for dist in (
        "tensorrt",
        "tensorrt-cu13",
        "tensorrt-cu12",
        "tensorrt_cu13",
        "tensorrt_cu12",
        "tensorrt-libs",
    ):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_sidecar(
    engine: str | Path,
    meta: dict[str, Any],
    *,
    trt_version: str | None,
    gpu_name: str | None,
    compute_capability: str | None,
) -> None:
    """Refuse an engine built for another GPU or TensorRT version, saying which."""
    built_trt = meta.get("tensorrt_version")
    if built_trt and trt_version and built_trt != trt_version:
        raise ConversionError(
            f"{engine}: built with TensorRT {built_trt}, this machine has "
            f"TensorRT {trt_version}; an engine only runs on the version that "
            f"built it: rebuild it here with 'dlbench build --to tensorrt'"
        )
    gpu = meta.get("gpu") or {}
    if gpu_name is None:
        raise ConversionError(
            f"{engine}: a TensorRT engine needs an NVIDIA GPU, and this machine "
            f"has none (nvidia-smi found none)"
        )
    if gpu.get("name") and gpu["name"] != gpu_name:
        raise ConversionError(
            f"{engine}: built for {gpu['name']}, this machine's GPU is {gpu_name}; "
            f"an engine only runs on the GPU model that built it: rebuild it here"
        )
    built_cc = str(gpu.get("compute_capability") or "")
    if built_cc and compute_capability and built_cc != str(compute_capability):
        raise ConversionError(
            f"{engine}: built for compute capability {built_cc}, this GPU has "
            f"{compute_capability}; rebuild it here"
        )


# --- CUDA through cuda-python ------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def cudart():
    """``cuda.bindings.runtime`` (cuda-python >= 12.6) or the older ``cuda.cudart``; looked
    up once, since ``check`` runs on every CUDA call, the timed ones included."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        try:
            from cuda import cudart as runtime
        except ImportError:
            raise ConversionError("cuda-python is not installed: pip install 'dlbench[tensorrt]'") from None
    return runtime


def check(result: Any) -> Any:
    """Unpack cuda-python's ``(error, *values)`` (every binding returns the error first,
    also the calls with no value); raise with the error's name."""
    rt = cudart()
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if int(err) != int(rt.cudaError_t.cudaSuccess):
        _, name = rt.cudaGetErrorName(err)
        raise RuntimeError(f"CUDA error {name.decode() if isinstance(name, bytes) else name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def device_properties(device: int = 0) -> dict[str, str]:
    rt = cudart()
    check(rt.cudaSetDevice(device))
    props = check(rt.cudaGetDeviceProperties(device))
    name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
    return {"name": name.rstrip("\x00").strip(), "compute_capability": f"{props.major}.{props.minor}"}


class DeviceBuffer:
    """One ``cudaMalloc`` allocation, freed when closed."""

    def __init__(self, nbytes: int):
        self.nbytes = max(1, int(nbytes))
        self.ptr = int(check(cudart().cudaMalloc(self.nbytes)))

    def upload(self, array) -> None:
        import numpy as np

        rt = cudart()
        array = np.ascontiguousarray(array)
        if array.nbytes > self.nbytes:
            raise ValueError(f"{array.nbytes} bytes do not fit a {self.nbytes}-byte buffer")
        check(
            rt.cudaMemcpy(self.ptr, array.ctypes.data, array.nbytes, rt.cudaMemcpyKind.cudaMemcpyHostToDevice)
        )

    def download(self, array) -> None:
        rt = cudart()
        check(
            rt.cudaMemcpy(array.ctypes.data, self.ptr, array.nbytes, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost)
        )

    def close(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            check(cudart().cudaFree(ptr))
