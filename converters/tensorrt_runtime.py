"""TensorRT engines on the correctness path: the sidecar contract, loading, one inference.

An engine only runs on the GPU model and TensorRT version that built it, so
``dlbench build`` writes ``ENGINE.json`` next to ``ENGINE`` (TensorRT
version, GPU name and compute capability, precision, profile, build path)
and ``check_sidecar`` refuses an engine elsewhere with that reason — in the
parent from the machine fingerprint, before any process starts, and again in
the child from what TensorRT and CUDA report.

``Engine.infer`` is for verification, not timing: it allocates buffers per
call and synchronizes after every copy.  Device memory, copies and the stream
come from cuda-python (NVIDIA's bindings, wheels only; pycuda would need a
CUDA toolkit to compile).  ``tensorrt`` and ``cuda`` are imported inside the
functions that need them, so this module loads on any machine.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlbench.models.errors import UserError

SIDECAR_FORMAT = "dlbench-tensorrt-engine/1"
ENGINE_SUFFIXES = (".plan", ".engine", ".trt")


def sidecar_path(engine: str | Path) -> Path:
    engine = Path(engine)
    return engine.with_name(engine.name + ".json")


def read_sidecar(engine: str | Path) -> dict[str, Any]:
    path = sidecar_path(engine)
    if not path.is_file():
        raise UserError(f"{engine}: no {path.name} next to it, so nothing says which GPU and "
                        f"TensorRT version built it; rebuild it with 'dlbench build --to tensorrt'")
    try:
        meta = json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != SIDECAR_FORMAT:
        raise UserError(f"{path}: not a dlbench engine sidecar (format {SIDECAR_FORMAT})")
    return meta


def tensorrt_version_here() -> str | None:
    """The installed TensorRT's version, from package metadata (no import)."""
    from dlbench.harness.frameworks import distribution_version

    for dist in ("tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt_cu13", "tensorrt_cu12",
                 "tensorrt-libs"):
        version = distribution_version(dist)
        if version:
            return version
    return None


def check_sidecar(engine: str | Path, meta: dict[str, Any], *, trt_version: str | None,
                  gpu_name: str | None, compute_capability: str | None) -> None:
    """Refuse an engine built for another GPU or TensorRT version, saying which."""
    built_trt = meta.get("tensorrt_version")
    if built_trt and trt_version and built_trt != trt_version:
        raise UserError(f"{engine}: built with TensorRT {built_trt}, this machine has "
                        f"TensorRT {trt_version}; an engine only runs on the version that "
                        f"built it: rebuild it here with 'dlbench build --to tensorrt'")
    gpu = meta.get("gpu") or {}
    if gpu_name is None:
        raise UserError(f"{engine}: a TensorRT engine needs an NVIDIA GPU, and this machine "
                        f"has none (nvidia-smi found none)")
    if gpu.get("name") and gpu["name"] != gpu_name:
        raise UserError(f"{engine}: built for {gpu['name']}, this machine's GPU is {gpu_name}; "
                        f"an engine only runs on the GPU model that built it: rebuild it here")
    built_cc = str(gpu.get("compute_capability") or "")
    if built_cc and compute_capability and built_cc != str(compute_capability):
        raise UserError(f"{engine}: built for compute capability {built_cc}, this GPU has "
                        f"{compute_capability}; rebuild it here")


def check_engine_here(engine: str | Path) -> dict[str, Any]:
    """Parent-side check from the fingerprint (no TensorRT import); returns the sidecar."""
    from dlbench.harness.fingerprint import fingerprint

    meta = read_sidecar(engine)
    gpus = fingerprint()["gpus"]
    check_sidecar(engine, meta, trt_version=tensorrt_version_here(),
                  gpu_name=gpus[0]["name"] if gpus else None,
                  compute_capability=gpus[0].get("compute_capability") or None if gpus else None)
    return meta


# --- CUDA through cuda-python ------------------------------------------------------------

def cudart():
    """``cuda.bindings.runtime`` (cuda-python >= 12.6) or the older ``cuda.cudart``."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        try:
            from cuda import cudart as runtime
        except ImportError:
            raise UserError("cuda-python is not installed: pip install 'dlbench[tensorrt]'") from None
    return runtime


def check(result: Any) -> Any:
    """Unpack cuda-python's ``(error, *values)``; raise with the error's name."""
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
        check(rt.cudaMemcpy(self.ptr, array.ctypes.data, array.nbytes,
                            rt.cudaMemcpyKind.cudaMemcpyHostToDevice))

    def download(self, array) -> None:
        rt = cudart()
        check(rt.cudaMemcpy(array.ctypes.data, self.ptr, array.nbytes,
                            rt.cudaMemcpyKind.cudaMemcpyDeviceToHost))

    def close(self) -> None:
        if self.ptr:
            cudart().cudaFree(self.ptr)
            self.ptr = 0


class Engine:
    """A deserialized engine with one execution context and one CUDA stream."""

    def __init__(self, path: str | Path, logger=None):
        import tensorrt as trt

        self.trt = trt
        self.path = Path(path)
        self.logger = logger or trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(self.path.read_bytes())
        if self.engine is None:
            raise UserError(f"{path}: TensorRT {trt.__version__} cannot deserialize this engine "
                            f"(built by another TensorRT version or for another GPU?)")
        self.context = self.engine.create_execution_context()
        self.stream = check(cudart().cudaStreamCreate())
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.inputs = [n for n in names
                       if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in names if n not in self.inputs]

    def dtype(self, name: str):
        import numpy as np

        return np.dtype(self.trt.nptype(self.engine.get_tensor_dtype(name)))

    def infer(self, feeds: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        rt = cudart()
        buffers: list[DeviceBuffer] = []
        try:
            for name in self.inputs:
                array = np.ascontiguousarray(feeds[name], dtype=self.dtype(name))
                if not self.context.set_input_shape(name, array.shape):
                    lo, _, hi = self.engine.get_tensor_profile_shape(name, 0)
                    raise UserError(f"{self.path}: input {name!r} of shape {array.shape} is outside "
                                    f"the engine's profile {tuple(lo)}..{tuple(hi)}")
                buf = DeviceBuffer(array.nbytes)
                buffers.append(buf)
                buf.upload(array)
                self.context.set_tensor_address(name, buf.ptr)
            results = {}
            for name in self.outputs:
                shape = tuple(self.context.get_tensor_shape(name))
                results[name] = np.empty(shape, dtype=self.dtype(name))
                buf = DeviceBuffer(results[name].nbytes)
                buffers.append(buf)
                self.context.set_tensor_address(name, buf.ptr)
            if not self.context.execute_async_v3(int(self.stream)):
                raise RuntimeError(f"{self.path}: TensorRT execute_async_v3 failed")
            check(rt.cudaStreamSynchronize(self.stream))
            for name, buf in zip(self.outputs, buffers[len(self.inputs):]):
                buf.download(results[name])
            return {k: v.astype(np.float32) if v.dtype == np.float16 else v
                    for k, v in results.items()}
        finally:
            for buf in buffers:
                buf.close()

    def close(self) -> None:
        if self.stream is not None:
            cudart().cudaStreamDestroy(self.stream)
            self.stream = None
