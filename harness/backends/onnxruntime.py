"""ONNX Runtime: CPU execution provider; CUDA/TensorRT providers with onnxruntime-gpu.

Session options are the user's to set and are all recorded: intra-op threads
(default physical cores), inter-op threads (default 1, sequential
execution), graph optimization level (default all), and whether idle
intra-op threads spin (ORT's default, on).  On a GPU, inputs are bound once
as device OrtValues and outputs stay on the device (I/O binding), so the
timed region is the run and its synchronization, as on every backend; on the
CPU, ``session.run`` is called with numpy inputs that ORT reads in place.

A session whose first provider is not the one asked for, or (on a GPU) any
node that ORT would place on the CPU, fails the cell instead of reporting a
CPU number under a GPU label.

float32 is IEEE float32: the CUDA provider's ``use_tf32`` (on by default) is
"0" unless the cell asks for ``tf32`` (an fp32 model in TensorFloat-32 math,
on a GPU that has it), and the math mode is read back from the session
(``harness.cells.mathmode``).
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
    has_nvidia_gpu,
    region,
    with_tf32,
)
from dlbench.harness.cells import mathmode, stage
from dlbench.harness.formats import ONNX
from dlbench.harness.machine.frameworks import distribution_version

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
LEVELS = ("all", "extended", "basic", "disable")


class OrtRunner(Runner):
    # ``dlbench profile``: a folder for ONNX Runtime's profiler trace and the optimized graph
    # it ran, set before ``load`` (the session is profiled from its creation).
    profile_dir: str | None = None

    def load(self) -> None:
        import onnxruntime as ort

        self.ort = ort
        o = self.cfg.options
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.cfg.intra_op_threads
        so.inter_op_num_threads = self.cfg.inter_op_threads
        so.execution_mode = (
            ort.ExecutionMode.ORT_SEQUENTIAL
            if self.cfg.inter_op_threads <= 1
            else ort.ExecutionMode.ORT_PARALLEL
        )
        so.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[o["graph_optimization"]]
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if o["spin"] == "on" else "0")
        # Fatal only: every error also comes back as the exception dlbench reports in one
        # line; ONNX Runtime's own log of it would be a second, coloured line on stderr.
        so.log_severity_level = 4
        if self.profile_dir:
            import os

            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(self.profile_dir, "trace")
            so.optimized_model_filepath = os.path.join(self.profile_dir, "optimized.onnx")
        self.gpu = self.cfg.device == "cuda"
        if self.cfg.precision == mathmode.TF32 and not self.gpu:
            raise UserError("--precision tf32: " + mathmode.tf32_reason(self.cfg.device))
        math_opts = mathmode.onnxruntime_options(so, self.cfg.precision)
        if self.gpu:
            # Refuse, at session creation, any node that would quietly run on the CPU.
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
            wanted = o["provider"]
            cuda_opts = {"device_id": self.cfg.device_id, **math_opts}
            if o["cuda_graph"] == "on":
                cuda_opts["enable_cuda_graph"] = "1"
            providers: list[Any] = [("CUDAExecutionProvider", cuda_opts)]
            if wanted == "tensorrt":
                providers.insert(0, ("TensorrtExecutionProvider", {"device_id": self.cfg.device_id}))
            self.expected = PROVIDERS[wanted]
        else:
            providers = ["CPUExecutionProvider"]
            self.expected = PROVIDERS["cpu"]
        self.session_options = so
        level = o["graph_optimization"]
        stage.enter(
            f"creating ONNX Runtime's session (graph optimization {level}, {self.expected})",
            f"-O graph_optimization=basic applies fewer fusions than {level}"
            if level in ("all", "extended")
            else None,
        )
        try:
            self.session = ort.InferenceSession(self.artifact.path, sess_options=so, providers=providers)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own types; classify by text
            raise _load_error(self.artifact.path, exc) from None
        self.io_binding = o["io_binding"] == "on" or (o["io_binding"] == "auto" and self.gpu)
        if o["cuda_graph"] == "on" and not (self.gpu and self.io_binding):
            raise UserError("onnxruntime cuda_graph needs --device cuda with I/O binding")
        self.math = mathmode.onnxruntime_math(self.session, so, self.cfg.precision)

    def inputs(self) -> list[TensorInfo]:
        return [
            TensorInfo(i.name, _ort_dtype(i.type), tuple(_dim(d) for d in i.shape))
            for i in self.session.get_inputs()
        ]

    def prepare(self, feeds: dict[str, Any]) -> Any:
        if not self.io_binding:
            return dict(feeds)
        ort, device = self.ort, ("cuda" if self.gpu else "cpu")
        binding = self.session.io_binding()
        keep = []
        for name, array in feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(array, device, self.cfg.device_id)
            keep.append(value)
            binding.bind_ortvalue_input(name, value)
        for out in self.session.get_outputs():
            binding.bind_output(out.name, device, self.cfg.device_id)
        binding.synchronize_inputs()
        return (binding, keep)

    def run(self, handle: Any) -> None:
        if self.io_binding:
            self.session.run_with_iobinding(handle[0])
            self._last = handle[0]
        else:
            self._last = self.session.run(None, handle)

    def sync(self) -> None:
        if self.io_binding and self.gpu:
            self._last.synchronize_outputs()

    def outputs(self) -> dict[str, Any]:
        names = [o.name for o in self.session.get_outputs()]
        if self.io_binding:
            return dict(zip(names, self._last.copy_outputs_to_cpu()))
        return dict(zip(names, self._last))

    def timed_region(self) -> dict[str, Any]:
        if self.gpu:
            summary = (
                "session.run_with_iobinding on device-resident inputs, outputs bound on "
                "the device, then synchronize_outputs"
            )
        elif self.io_binding:
            summary = "session.run_with_iobinding on OrtValue inputs in host memory"
        else:
            summary = (
                "session.run(None, feeds) with numpy inputs in host memory (the CPU "
                "device's memory); outputs allocated by ORT each run"
            )
        return region(
            summary,
            host_device_copies=False,
            io_binding=self.io_binding,
            cuda_graph=self.cfg.options["cuda_graph"] == "on",
            sync="blocking: run returns when outputs are ready"
            if not self.gpu
            else "IOBinding.synchronize_outputs",
            intra_op_spinning=self.cfg.options["spin"] == "on",
        )

    def runtime(self) -> dict[str, Any]:
        providers = self.session.get_providers()
        ran = providers[0] if providers else None
        kind = {
            "CPUExecutionProvider": "cpu",
            "CUDAExecutionProvider": "cuda",
            "TensorrtExecutionProvider": "cuda",
        }.get(ran, ran)
        so = self.session_options
        return {
            "device_kind": kind,
            "providers": providers,
            "provider_options": self.session.get_provider_options(),
            "intra_op_threads": so.intra_op_num_threads,
            "inter_op_threads": so.inter_op_num_threads,
            "execution_mode": str(so.execution_mode).split(".")[-1],
            "graph_optimization_level": str(so.graph_optimization_level).split(".")[-1],
            "onnxruntime": self.ort.__version__,
            "io_binding": self.io_binding,
            "math_mode": self.math,
        }

    def verify(self, runtime: dict[str, Any]) -> None:
        providers = runtime["providers"]
        if not providers or providers[0] != self.expected:
            raise FellBack(
                f"asked for {self.expected}, ONNX Runtime's session runs "
                f"{providers[0] if providers else 'nothing'} "
                f"(available: {', '.join(self.ort.get_available_providers())})"
            )


def _load_error(path: str | None, exc: Exception) -> Exception:
    """ORT's errors about the model itself are the user's to fix: one line, exit 2."""
    text = str(exc).strip()
    first = first_line(exc)
    if "onnxruntime::" in first and ") " in first:
        first = first.rsplit(") ", 1)[1]  # drop ORT's C++ source location and signature
    user = (
        "INVALID_GRAPH",
        "INVALID_PROTOBUF",
        "NOT_IMPLEMENTED",
        "IR version",
        "Could not find",
        "No Op registered",
        "INVALID_ARGUMENT",
        "Load model",
        "NO_SUCHFILE",
    )
    if any(marker in text for marker in user):
        return UserError(f"ONNX Runtime cannot load {path}: {first}")
    return RuntimeError(f"ONNX Runtime failed to create a session for {path}: {first}")


def _dim(d: Any) -> Any:
    return d if isinstance(d, int) else (d or None)


def _ort_dtype(type_str: str) -> str:
    inner = type_str[len("tensor(") : -1] if type_str.startswith("tensor(") else type_str
    return {
        "float": "float32",
        "double": "float64",
        "float16": "float16",
        "bfloat16": "bfloat16",
        "int64": "int64",
        "int32": "int32",
        "int16": "int16",
        "int8": "int8",
        "uint8": "uint8",
        "uint16": "uint16",
        "uint32": "uint32",
        "uint64": "uint64",
        "bool": "bool",
        "string": "str",
    }.get(inner, inner)


class OnnxRuntime(Backend):
    formats = (ONNX,)
    inter_op_pool = True  # more than one: the parallel execution mode
    verify_in_parent = True
    options = (
        Option(
            "graph_optimization", "all", LEVELS, help="ORT graph optimization level", tune_on=("cpu", "cuda")
        ),
        Option(
            "io_binding",
            "auto",
            ("auto", "on", "off"),
            help="bind inputs/outputs as OrtValues (auto: on a GPU only)",
        ),
        Option(
            "provider",
            "cuda",
            ("cuda", "tensorrt"),
            help="execution provider for --device cuda",
            tune_on=("cuda",),
        ),
        Option(
            "cuda_graph",
            "off",
            ON_OFF,
            help="capture the run as a CUDA graph (GPU)",
            switch=True,
            tune_on=("cuda",),
        ),
        Option(
            "spin", "on", ON_OFF, help="intra-op threads spin while idle (ORT default on)", tune_on=("cpu",)
        ),
    )

    more_packages = ("onnxruntime-gpu",)  # the CUDA build, another distribution

    def missing(self):
        if distribution_version("onnxruntime") or distribution_version("onnxruntime-gpu"):
            return None
        return "onnxruntime is not installed: pip install 'dlbench[onnx]'"

    def version(self):
        return distribution_version("onnxruntime-gpu") or distribution_version("onnxruntime")

    def math_environment(self, device, precision, options):
        """The CUDA provider's own ``use_tf32`` (set, and read back from the session) keeps
        float32 IEEE; NVIDIA_TF32_OVERRIDE=0 on top of it makes cuDNN's frontend find no
        plan for some convolutions (ONNX Runtime 1.31.1, cuDNN 9 on an H200: ResNet-50's
        layer4 at batch 128 failed with HEURISTIC_QUERY_FAILED), so it is left unset there.
        The TensorRT provider has no per-session switch: it keeps the variable."""
        if options.get("provider") == "cuda":
            return {}
        return super().math_environment(device, precision, options)

    def devices(self):
        gpu = distribution_version("onnxruntime-gpu") and has_nvidia_gpu()
        return ["cpu", "cuda"] if gpu else ["cpu"]

    def precisions(self, device):
        base = ("auto", "fp32", "fp16", "bf16", "int8")
        return with_tf32(base, device) if device == "cuda" else base

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return OrtRunner(artifact, cfg)


BACKEND = OnnxRuntime(
    "onnxruntime",
    "ONNX Runtime (CPU execution provider; CUDA and TensorRT "
    "providers with onnxruntime-gpu on an NVIDIA GPU)",
    "onnxruntime",
    "onnxruntime",
    "onnx",
)
