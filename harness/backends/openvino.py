"""OpenVINO: the CPU plugin, running ONNX files.

fp32 means fp32 here too: on a CPU with AVX512_BF16 (or AMX) the CPU
plugin's default ``INFERENCE_PRECISION_HINT`` is bf16, so a default "fp32"
run computes its convolutions and matmuls in bf16 (about 2x faster on
ResNet-50, and wrong under the label).  Each cell sets the hint from its
precision and reads back both the compiled model's hint and the precision
every node of the runtime graph runs in; a cell whose read-back is not what
it asked for fails (``FellBack``).  An fp16 ONNX computes in f32 on a CPU
without fp16 arithmetic: asking for f16 there silently gives bf16.

Threads and streams are set and read back too: the plugin caps
``INFERENCE_NUM_THREADS`` at the cores it sees and lowers ``NUM_STREAMS`` to
the threads it has, quietly; a record must not claim threads that did not
run.  OpenVINO has no inter-op pool: streams are its closest thing.

A symbolic batch is fixed at load where the cell runs one batch size (a
static model is about 20 % faster on small graphs, with the same outputs);
cells that take several (server scenario, eval) compile it dynamic.  The fixed shape is
also where the plugin has crashed (2026.4 segfaults compiling densenet121-mini's INT8 build
at 1x3x64x64, and runs it dynamic): a cell that dies compiling says so, and names
``-O reshape=off`` (``harness.cells.stage``).
"""

from __future__ import annotations

from typing import Any

from dlbench.core.errors import UserError, first_line
from dlbench.harness.backends.base import (
    ON_OFF,
    ArtifactRef,
    Backend,
    FellBack,
    Option,
    RunConfig,
    Runner,
    TensorInfo,
    region,
)
from dlbench.harness.cells import mathmode, stage
from dlbench.harness.formats import ONNX
from dlbench.harness.machine.hardware import cpu

OWN_SHAPES = "static (the model's own)"

# dlbench precision -> INFERENCE_PRECISION_HINT (fp16 models: see _hint).
HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}
NARROW = ("bf16", "f16")  # float types a hint may quietly compute in
QUANTIZED = ("i8", "u8")
DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f64": "float64",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "boolean": "bool",
    "string": "str",
}
# Runtime-graph nodes that hold or move data rather than compute.
NOT_COMPUTE = ("Input", "Output", "Const")


class _Batch:
    """One prepared batch: ov.Tensors over the caller's arrays, and the request they feed."""

    __slots__ = ("request", "tensors", "arrays")

    def __init__(self, request: Any, tensors: dict[str, Any], arrays: dict[str, Any]):
        self.request, self.tensors, self.arrays = request, tensors, arrays


class OvRunner(Runner):
    # The profile cell's switch: the plugin's performance counters on (each node's mean
    # time), which bench's cells leave off for what they cost every node.
    perf_counts = False

    def load(self) -> None:
        import openvino as ov

        self.ov = ov
        if self.cfg.device != "cpu":
            raise UserError(f"openvino runs on the CPU only, not {self.cfg.device}")
        self.env = mathmode.check_env(self.cfg.precision)
        o = self.cfg.options
        if int(o["streams"]) < 1:
            raise UserError(f"openvino option streams: {o['streams']} is not a positive count")
        core = ov.Core()
        caps = list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
        self.hint = _hint(self.cfg.precision, caps)
        self.asked = {
            "INFERENCE_PRECISION_HINT": self.hint,
            "INFERENCE_NUM_THREADS": self.cfg.intra_op_threads,
            "NUM_STREAMS": int(o["streams"]),
            "PERFORMANCE_HINT": o["performance_hint"],
            "ENABLE_CPU_PINNING": o["pinning"] == "on",
        }
        if self.perf_counts:
            self.asked["PERF_COUNT"] = True
        try:
            model = core.read_model(self.artifact.path)
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError for bad files
            raise UserError(f"OpenVINO cannot read {self.artifact.path}: {first_line(exc)}") from None
        self.signature = [
            TensorInfo(
                p.get_any_name(),
                _dtype(p.get_element_type()),
                tuple(d.get_length() if d.is_static else None for d in p.get_partial_shape()),
            )
            for p in model.inputs
        ]
        self.output_names = [p.get_any_name() for p in model.outputs]
        self.shapes = self._fix_shapes(model)
        fixed = self.shapes.startswith("static ") and self.shapes != OWN_SHAPES
        stage.enter(
            f"compiling the model in OpenVINO's CPU plugin (shapes: {self.shapes})",
            "-O reshape=off compiles it with its dynamic dimensions" if fixed else None,
        )
        try:
            self.compiled = core.compile_model(model, "CPU", self.asked)
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError and its own types
            raise RuntimeError(
                f"OpenVINO's CPU plugin cannot compile {self.artifact.path}: {first_line(exc)}"
            ) from None
        self.requests: dict[tuple, Any] = {}
        self.bound: dict[int, _Batch] = {}
        self._last: Any = None
        self.verify(self.runtime())  # refuse now, before minutes of measuring

    def _fix_shapes(self, model) -> str:
        """Reshape symbolic dimensions to the cell's one shape; say what the model runs with."""
        dynamic = [t for t in self.signature if any(d is None for d in t.shape)]
        if not dynamic:
            return OWN_SHAPES
        why = (
            "-O reshape=off"
            if self.cfg.options["reshape"] == "off"
            else "the cell runs several batch sizes"
            if self.cfg.min_batch != self.cfg.max_batch
            else None
        )
        missing = [t.name for t in dynamic if t.name not in self.cfg.shapes]
        if why is None and missing:
            why = f"no shape given for {', '.join(missing)}"
        if why:
            return f"dynamic ({why})"
        fixed = {t.name: list(self.cfg.shapes[t.name]) for t in dynamic}
        try:
            model.reshape({n: self.ov.PartialShape(s) for n, s in fixed.items()})
        except Exception as exc:  # noqa: BLE001 - OpenVINO raises RuntimeError and its own types
            raise UserError(
                f"OpenVINO cannot fix {self.artifact.path}'s shapes to {fixed}: "
                f"{first_line(exc)}; bench it with -O reshape=off"
            ) from None
        return "static " + ", ".join(f"{n}={'x'.join(map(str, s))}" for n, s in fixed.items())

    def inputs(self) -> list[TensorInfo]:
        return list(self.signature)

    def prepare(self, feeds: dict[str, Any]) -> _Batch:
        import numpy as np

        arrays = {n: np.ascontiguousarray(a) for n, a in feeds.items()}
        key = tuple(sorted((n, a.shape, a.dtype.str) for n, a in arrays.items()))
        if key not in self.requests:  # one request per shape: its buffers fit it
            self.requests[key] = self.compiled.create_infer_request()
        batch = _Batch(
            self.requests[key], {n: self.ov.Tensor(a, shared_memory=True) for n, a in arrays.items()}, arrays
        )
        self._bind(batch)
        return batch

    def _bind(self, batch: _Batch) -> None:
        for name, tensor in batch.tensors.items():
            batch.request.set_tensor(name, tensor)
        self.bound[id(batch.request)] = batch

    def run(self, handle: _Batch) -> None:
        if self.bound.get(id(handle.request)) is not handle:
            self._bind(handle)  # another batch of this shape was prepared since
        handle.request.infer(share_outputs=True)
        self._last = handle.request

    def outputs(self) -> dict[str, Any]:
        if self._last is None:
            return {}
        return {name: self._last.get_output_tensor(i).data.copy() for i, name in enumerate(self.output_names)}

    def counters(self) -> list[Any]:
        """The performance counters, one per runtime-graph node: each its mean time over
        every run since the model was compiled (``profile.ov_cell`` takes the difference)."""
        return list(self._last.get_profiling_info()) if self._last is not None else []

    def timed_region(self) -> dict[str, Any]:
        return region(
            "InferRequest.infer() (synchronous) on ov.Tensors that share the numpy "
            "inputs' memory, bound to the request once per prepared batch (again "
            "only when another batch of the same shape was prepared since); "
            "outputs stay in the request's tensors",
            host_device_copies=False,
            sync="blocking: infer returns when outputs are ready",
            shapes=self.shapes,
            streams=int(self.cfg.options["streams"]),
        )

    def runtime(self) -> dict[str, Any]:
        c = self.compiled
        props = {
            k: _plain(c.get_property(k))
            for k in (
                "INFERENCE_PRECISION_HINT",
                "INFERENCE_NUM_THREADS",
                "NUM_STREAMS",
                "PERFORMANCE_HINT",
                "EXECUTION_DEVICES",
                "EXECUTION_MODE_HINT",
                "ENABLE_CPU_PINNING",
                "ENABLE_HYPER_THREADING",
                "SCHEDULING_CORE_TYPE",
            )
        }
        nodes: dict[str, int] = {}
        for op in c.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            if info["layerType"].astype(str) not in NOT_COMPUTE:
                p = info["runtimePrecision"].astype(str)
                nodes[p] = nodes.get(p, 0) + 1
        devices = props["EXECUTION_DEVICES"]
        return {
            "device_kind": "cpu" if devices == ["CPU"] else ",".join(devices).lower(),
            "openvino": self.ov.__version__,
            "properties": props,
            "asked": {k: _plain(v) for k, v in self.asked.items()},
            "intra_op_threads": props["INFERENCE_NUM_THREADS"],
            "inter_op_threads": "none in OpenVINO (streams: see properties)",
            "shapes": self.shapes,
            "math_mode": {
                "openvino.inference_precision_hint": props["INFERENCE_PRECISION_HINT"],
                "openvino.node_precisions": nodes,
                "env": self.env,
            },
        }

    def verify(self, runtime: dict[str, Any]) -> None:
        props, asked = runtime["properties"], {k: _plain(v) for k, v in self.asked.items()}
        if props["EXECUTION_DEVICES"] != ["CPU"]:
            raise FellBack(
                f"asked for the CPU plugin, OpenVINO ran on {', '.join(props['EXECUTION_DEVICES'])}"
            )
        wrong = [
            f"{k}={asked[k]} ran as {props[k]}"
            for k in (
                "INFERENCE_PRECISION_HINT",
                "INFERENCE_NUM_THREADS",
                "NUM_STREAMS",
                "PERFORMANCE_HINT",
                "ENABLE_CPU_PINNING",
            )
            if props[k] != asked[k]
        ]
        nodes = runtime["math_mode"]["openvino.node_precisions"]
        narrow = {p: n for p, n in nodes.items() if p in NARROW and p != self.hint}
        if narrow:
            wrong.append(f"{sum(narrow.values())} nodes compute in {', '.join(narrow)}")
        if self.hint in NARROW and self.hint not in nodes:
            wrong.append(f"no node computes in {self.hint}")
        if self.cfg.precision == "int8" and not any(p in nodes for p in QUANTIZED):
            wrong.append("no node computes in int8 (the QDQ pairs were not fused)")
        if wrong:
            raise FellBack(
                f"--precision {self.cfg.precision}: OpenVINO's CPU plugin did not "
                f"run as asked: {'; '.join(wrong)}"
            )


def _hint(precision: str, caps: list[str]) -> str:
    """The precision hint for a cell; an fp16 model computes in f16 only where the CPU can."""
    if precision == "fp16":
        return "f16" if "FP16" in caps else "f32"
    if precision == "bf16" and "BF16" not in caps:
        raise UserError(
            f"--precision bf16: OpenVINO's CPU plugin has no bf16 on this CPU "
            f"(its capabilities: {', '.join(caps)})"
        )
    if precision not in HINTS:
        raise UserError(
            f"--precision {precision}: openvino runs "
            f"{', '.join(p for p in BACKEND.precisions('cpu') if p != 'auto')}"
        )
    return HINTS[precision]


def _dtype(t: Any) -> str:
    name = t.get_type_name()
    return DTYPES.get(name, name)


def _plain(value: Any) -> Any:
    """A property as JSON: element types by their short name, enums by theirs."""
    if hasattr(value, "get_type_name"):
        return value.get_type_name()
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return getattr(value, "name", str(value))


def bf16_here() -> bool:
    """Whether the CPU plugin offers bf16 here, from /proc/cpuinfo (no OpenVINO import)."""
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu()["isa"]))


class OpenVino(Backend):
    formats = (ONNX,)
    options = (
        Option(
            "performance_hint",
            "LATENCY",
            ("LATENCY", "THROUGHPUT"),
            help="PERFORMANCE_HINT (the plugin's defaults for threads and pinning)",
            tune_on=("cpu",),
        ),
        Option(
            "streams",
            1,
            kind=int,
            help="NUM_STREAMS; one synchronous request runs on one stream, with "
            "threads/streams of the threads",
            tune_on=("cpu",),
            tune_values=(1, 2),
        ),
        Option(
            "pinning",
            "on",
            ON_OFF,
            help="ENABLE_CPU_PINNING: threads bound to cores (the plugin's Linux default)",
            tune_on=("cpu",),
        ),
        Option(
            "reshape",
            "auto",
            ("auto", "off"),
            help="auto: symbolic dimensions fixed at load when the cell runs one batch "
            "size; off: compiled dynamic",
        ),
    )

    def precisions(self, device):
        return ("auto", "fp32", "fp16", "int8") + (("bf16",) if bf16_here() else ())

    def precision_reason(self, device, precision):
        if precision == "bf16":
            return "OpenVINO's CPU plugin runs bf16 on CPUs with AVX512_BF16 or AMX; this one has neither"
        return super().precision_reason(device, precision)

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return OvRunner(artifact, cfg)


BACKEND = OpenVino(
    "openvino",
    "OpenVINO (CPU plugin; fp32 as IEEE f32, bf16 its own precision)",
    "openvino",
    "openvino",
    "openvino",
)
