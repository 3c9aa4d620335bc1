"""NVIDIA TensorRT engines: needs the tensorrt package, cuda-python and an NVIDIA GPU.

Takes a serialized engine (``dlbench build``'s ``.plan`` with its JSON
sidecar) or an ONNX file, which is built into an engine in the cell (the
build time is the cell's load time, reported apart).  Builds are strongly
typed — the precision is the ONNX graph's own, as TensorRT 11 requires and
TensorRT 10 allows (``STRONGLY_TYPED``); an fp16 or int8 engine comes from an
fp16 or Q/DQ ONNX made by ``dlbench build``.

Measured like trtexec: device buffers are allocated once per input shape,
inputs are copied to the device before timing unless ``with_transfers`` is
on; every iteration records CUDA events around the host-to-device copies,
the enqueue and the device-to-host copies, so H2D, compute and D2H are
reported apart (``device_times``); ``cuda_graph`` captures the enqueue once
and replays it.  Memory, streams and events come from cuda-python, and every
CUDA call's return code is checked, in the timed ``run`` too (a failed
enqueue or copy fails the cell instead of timing nothing).  The three event
queries that split the times run after the synchronize, inside the timed
region; their host time per iteration is measured and stated
(``event_query_host_ms``).

TF32 is fixed when an engine is built: an ONNX built in the cell clears
``BuilderFlag.TF32`` unless the cell asks for ``tf32``; a ``.plan`` carries
the builder's read-back in its sidecar.  Both are the record's math mode.

Everything here imports TensorRT and CUDA lazily: the module loads on a
machine without either, where ``dlbench backends`` says why.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

# The engine sidecar contract (ENGINE.json: TensorRT version, GPU, precision, profile,
# source ONNX), the cuda-python helpers and the engine build are shared with converters/
# (dlbench build).
from dlbench.converters.tensorrt_build import build_in_cell
from dlbench.converters.tensorrt_runtime import (
    check,
    check_sidecar,
    cudart,
    device_properties,
    read_sidecar,
    tensorrt_version_here,
)
from dlbench.core.errors import UserError
from dlbench.harness.backends.base import (
    ON_OFF,
    ArtifactRef,
    Backend,
    FellBack,
    Option,
    RunConfig,
    Runner,
    TensorInfo,
    has_nvidia_gpu,
    region,
    with_tf32,
)
from dlbench.harness.backends.cuda_buffers import Buffers, allocate, capture_graph, upload
from dlbench.harness.cells import mathmode, stage
from dlbench.harness.formats import ONNX, TRT_ENGINE
from dlbench.harness.machine.fingerprint import fingerprint
from dlbench.harness.machine.frameworks import is_installed


class TrtRunner(Runner):
    def load(self) -> None:
        import tensorrt as trt

        self.trt, self.rt = trt, cudart()
        self._success = self.rt.cudaError_t.cudaSuccess
        check(self.rt.cudaSetDevice(self.cfg.device_id))
        self._free_at_start = check(self.rt.cudaMemGetInfo())[0]
        self._min_free = self._free_at_start
        self.logger = trt.Logger(trt.Logger.WARNING)
        runtime = trt.Runtime(self.logger)
        if self.artifact.format == TRT_ENGINE:
            # The parent checked the sidecar against the fingerprint; check again against what
            # TensorRT and CUDA report in this process.
            gpu = device_properties(self.cfg.device_id)
            check_sidecar(
                self.artifact.path,
                self.artifact.meta,
                trt_version=trt.__version__,
                gpu_name=gpu["name"],
                compute_capability=gpu["compute_capability"],
            )
            serialized = Path(self.artifact.path).read_bytes()
            self.built_here = False
            self.tf32_flag = self.artifact.meta.get("tf32")  # None: built before it was kept
        else:
            stage.enter(f"building a TensorRT {trt.__version__} engine from the ONNX file")
            serialized, self.tf32_flag = build_in_cell(
                trt,
                self.logger,
                self.artifact.path,
                workspace_mb=self.cfg.options["workspace_mb"],
                tf32=self.cfg.precision == mathmode.TF32,
                shapes=self.cfg.shapes,
                batch_range=(self.cfg.min_batch, self.cfg.max_batch),
            )
            self.built_here = True
        self.math = mathmode.tensorrt_math(self.tf32_flag, self.cfg.precision)
        self.engine = runtime.deserialize_cuda_engine(serialized)
        if self.engine is None:
            raise UserError(
                f"{self.artifact.path}: TensorRT {trt.__version__} cannot deserialize "
                f"this engine (built by another version or for another GPU?)"
            )
        self.context = self.engine.create_execution_context()
        self.stream = check(self.rt.cudaStreamCreate())
        self.events = {k: check(self.rt.cudaEventCreate()) for k in ("start", "h2d", "compute", "d2h")}
        self.names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.input_names = [n for n in self.names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.output_names = [n for n in self.names if n not in self.input_names]
        self.with_transfers = self.cfg.options["with_transfers"] == "on"
        self.use_graph = self.cfg.options["cuda_graph"] == "on"
        self._current: Buffers | None = None
        self._times: dict[str, list[float]] = {
            "h2d_ms": [],
            "compute_ms": [],
            "d2h_ms": [],
            "event_query_host_ms": [],
        }
        self._note_memory()

    def inputs(self) -> list[TensorInfo]:
        out = []
        for name in self.input_names:
            dims = tuple(None if d < 0 else int(d) for d in self.engine.get_tensor_shape(name))
            out.append(TensorInfo(name, self._np_dtype(name), dims))
        return out

    def _np_dtype(self, name: str) -> str:
        import numpy as np

        dtype = self.engine.get_tensor_dtype(name)
        try:
            return np.dtype(self.trt.nptype(dtype)).name
        except TypeError:
            raise UserError(f"tensor {name!r} is {dtype}, which has no numpy type") from None

    def prepare(self, feeds: dict[str, Any]) -> Buffers:
        import numpy as np

        rt = self.rt
        buf = Buffers({n: tuple(a.shape) for n, a in feeds.items()})
        for name in self.input_names:
            array = np.ascontiguousarray(feeds[name], dtype=self._np_dtype(name))
            if not self.context.set_input_shape(name, array.shape):
                lo, _, hi = self.engine.get_tensor_profile_shape(name, 0)
                raise UserError(
                    f"input {name!r} shape {array.shape} is outside the engine's "
                    f"profile {tuple(lo)}..{tuple(hi)}"
                )
            allocate(rt, buf, name, array.shape, array.dtype)
            np.copyto(buf.host[name], array)
            upload(rt, buf, name)
        for name in self.output_names:
            shape = tuple(self.context.get_tensor_shape(name))
            buf.shapes[name] = shape
            allocate(rt, buf, name, shape, np.dtype(self._np_dtype(name)))
        self._bind(buf)
        if self.use_graph:
            buf.graph_exec = capture_graph(rt, self.context, self.stream)
        self._note_memory()
        return buf

    def _bind(self, buf: Buffers) -> None:
        for name in self.input_names:
            self.context.set_input_shape(name, buf.shapes[name])
        for name in self.names:
            self.context.set_tensor_address(name, buf.device[name])
        self._current = buf

    def _ok(self, result: Any, call: str) -> None:
        """cuda-python returns ``(cudaError_t, ...)``; one comparison per call in the timed
        region, the error's name only when it failed."""
        if result[0] != self._success:
            check(result)  # raises with CUDA's name for the error
            raise RuntimeError(f"{call} failed: {result[0]}")

    def run(self, buf: Buffers) -> None:
        rt, stream, ev, ok = self.rt, self.stream, self.events, self._ok
        if buf is not self._current:
            self._bind(buf)
        ok(rt.cudaEventRecord(ev["start"], stream), "cudaEventRecord")
        if self.with_transfers:
            for name in self.input_names:
                ok(
                    rt.cudaMemcpyAsync(
                        buf.device[name],
                        buf.host[name].ctypes.data,
                        buf.nbytes[name],
                        rt.cudaMemcpyKind.cudaMemcpyHostToDevice,
                        stream,
                    ),
                    "cudaMemcpyAsync (host to device)",
                )
        ok(rt.cudaEventRecord(ev["h2d"], stream), "cudaEventRecord")
        if buf.graph_exec is not None:
            ok(rt.cudaGraphLaunch(buf.graph_exec, stream), "cudaGraphLaunch")
        elif not self.context.execute_async_v3(int(stream)):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        ok(rt.cudaEventRecord(ev["compute"], stream), "cudaEventRecord")
        if self.with_transfers:
            for name in self.output_names:
                ok(
                    rt.cudaMemcpyAsync(
                        buf.host[name].ctypes.data,
                        buf.device[name],
                        buf.nbytes[name],
                        rt.cudaMemcpyKind.cudaMemcpyDeviceToHost,
                        stream,
                    ),
                    "cudaMemcpyAsync (device to host)",
                )
        ok(rt.cudaEventRecord(ev["d2h"], stream), "cudaEventRecord")

    def sync(self) -> None:
        rt, ev = self.rt, self.events
        check(rt.cudaStreamSynchronize(self.stream))
        # Inside the timed region: the three queries' host time is measured and stated.
        start = time.perf_counter()
        h2d = rt.cudaEventElapsedTime(ev["start"], ev["h2d"])
        compute = rt.cudaEventElapsedTime(ev["h2d"], ev["compute"])
        d2h = rt.cudaEventElapsedTime(ev["compute"], ev["d2h"])
        query_ms = (time.perf_counter() - start) * 1000
        t = self._times
        t["h2d_ms"].append(check(h2d))
        t["compute_ms"].append(check(compute))
        t["d2h_ms"].append(check(d2h))
        t["event_query_host_ms"].append(query_ms)

    def outputs(self) -> dict[str, Any]:
        rt, buf = self.rt, self._current
        out = {}
        for name in self.output_names:
            check(
                rt.cudaMemcpy(
                    buf.host[name].ctypes.data,
                    buf.device[name],
                    buf.nbytes[name],
                    rt.cudaMemcpyKind.cudaMemcpyDeviceToHost,
                )
            )
            out[name] = buf.host[name].copy()
        return out

    def device_times(self) -> dict[str, list[float]]:
        return {k: list(v) for k, v in self._times.items()}

    def reset_device_times(self) -> None:
        for v in self._times.values():
            v.clear()

    def _note_memory(self) -> None:
        free = check(self.rt.cudaMemGetInfo())[0]
        self._min_free = min(self._min_free, free)

    def device_memory_mb(self) -> float | None:
        self._note_memory()
        return (self._free_at_start - self._min_free) / 2**20

    def timed_region(self) -> dict[str, Any]:
        parts = [
            "execute_async_v3" if not self.use_graph else "cudaGraphLaunch of the captured enqueue",
            "cudaStreamSynchronize",
        ]
        if self.with_transfers:
            parts = (
                ["H2D copies from pinned host buffers"]
                + parts[:1]
                + ["D2H copies to pinned host buffers"]
                + parts[1:]
            )
        queries = sorted(self._times["event_query_host_ms"])
        query_p50 = queries[len(queries) // 2] if queries else None
        return region(
            ", ".join(parts) + "; CUDA events split H2D / compute / D2H; after the "
            "synchronize, 3 cudaEventElapsedTime queries, also timed (host time "
            "per iteration: device_times_ms.event_query_host_ms)",
            host_device_copies=self.with_transfers,
            io_binding=True,
            cuda_graph=self.use_graph,
            sync="cudaStreamSynchronize (blocking)",
            event_queries_in_region=3,
            event_query_host_ms_p50=query_p50,
            cuda_return_codes_checked=True,
        )

    def runtime(self) -> dict[str, Any]:
        props = check(self.rt.cudaGetDeviceProperties(self.cfg.device_id))
        name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
        return {
            "device_kind": "cuda",
            "device_name": name.strip("\x00"),
            "tensorrt": self.trt.__version__,
            "engine_built_in_cell": self.built_here,
            "io_tensors": self.names,
            "math_mode": self.math,
            "device_memory_bytes": getattr(self.engine, "device_memory_size_v2", None),
        }

    def verify(self, runtime: dict[str, Any]) -> None:
        if runtime["device_kind"] != "cuda":
            raise FellBack("TensorRT runs on CUDA devices only")


def availability_problems() -> list[str]:
    """Why TensorRT engines cannot be built or run here (empty: they can), without importing
    TensorRT: the machine first, then the packages."""
    from dlbench.converters.onnx_to_tensorrt import missing_packages

    gpu = [] if has_nvidia_gpu() else ["no NVIDIA GPU on this machine (nvidia-smi found none)"]
    return gpu + missing_packages()


def check_engine_here(engine: str | Path) -> dict[str, Any]:
    """Parent-side check of an engine's sidecar against the fingerprint (no TensorRT import)."""
    meta = read_sidecar(engine)
    gpus = fingerprint()["gpus"]
    check_sidecar(
        engine,
        meta,
        trt_version=tensorrt_version_here(),
        gpu_name=gpus[0]["name"] if gpus else None,
        compute_capability=gpus[0].get("compute_capability") or None if gpus else None,
    )
    return meta


class TensorRT(Backend):
    formats = (TRT_ENGINE, ONNX)
    more_packages = ("cuda-python",)  # its CUDA runtime bindings
    verify_device = "cuda"
    options = (
        Option(
            "with_transfers",
            "off",
            ON_OFF,
            switch=True,
            help="include host-to-device and device-to-host copies in the timed region",
        ),
        Option(
            "cuda_graph",
            "off",
            ON_OFF,
            help="capture the enqueue as a CUDA graph",
            switch=True,
            tune_on=("cuda",),
        ),
        Option("workspace_mb", 4096, kind=int, help="builder workspace for ONNX builds"),
    )

    def missing(self):
        if not has_nvidia_gpu():  # the machine first: no package would help
            return self.no_device_reason()
        why = super().missing()
        if why is None and not is_installed("cuda"):
            return "cuda-python is not installed: pip install 'dlbench[tensorrt]'"
        return why

    def devices(self):
        return ["cuda"] if has_nvidia_gpu() else []

    def no_device_reason(self):
        return "no NVIDIA GPU on this machine (nvidia-smi found none)"

    def version(self):
        return tensorrt_version_here()

    def precisions(self, device):
        return with_tf32(("auto", "fp32", "fp16", "bf16", "int8", "best"), device)

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return TrtRunner(artifact, cfg)


BACKEND = TensorRT(
    "tensorrt", "TensorRT engines (fp32/fp16/int8) on an NVIDIA GPU", "tensorrt", "tensorrt", "tensorrt"
)
