"""PyTorch itself as an inference backend: eager, ``torch.compile``d, or replayed as a CUDA graph.

The model runs under ``torch.inference_mode``; fp16 (CUDA) and bf16 cast
the weights and inputs before timing.  float32 is IEEE float32 on every
device (cuBLAS, cuDNN and oneDNN switches set and read back by
``harness.cells.mathmode``); ``tf32`` runs the float32 model in TensorFloat-32.  On CUDA, ``sync`` is
``torch.cuda.synchronize`` so latencies are device time, not launch time, and
peak device memory is ``torch.cuda.max_memory_allocated``.  A model or an
output that is not on the device asked for fails the cell.

``--cuda-graph`` captures ``model(x)`` once per prepared batch (after three
warm-up calls on a side stream, as PyTorch's documentation prescribes) and
times ``graph.replay()``: the launch cost of hundreds of small kernels goes,
which is what decides small-batch latency on a fast GPU.  The capture is part
of the first inference (``cold_start``), not of the measured window.
torch.compile's ``reduce-overhead`` mode captures graphs itself, so the two are
not combined.
"""

from __future__ import annotations

import contextlib
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.backends.base import (
    ON_OFF,
    ArtifactRef,
    FellBack,
    Option,
    RunConfig,
    Runner,
    region,
    with_tf32,
)
from dlbench.harness.backends.native import NativeFramework, NativeRunner, native_formats
from dlbench.harness.cells import mathmode

DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class TorchRunner(NativeRunner):
    framework = "pytorch"

    def load(self) -> None:
        import torch

        self.torch = torch
        torch.set_num_threads(self.cfg.intra_op_threads)
        if torch.get_num_interop_threads() != self.cfg.inter_op_threads:
            with contextlib.suppress(RuntimeError):  # settable once per process
                torch.set_num_interop_threads(self.cfg.inter_op_threads)
        if self.cfg.device == "cuda":
            if not torch.cuda.is_available():
                raise UserError("--device cuda: PyTorch sees no CUDA device")
            self.device = torch.device("cuda", self.cfg.device_id)
            torch.cuda.set_device(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self.device = torch.device("cpu")
        if self.cfg.precision == "fp16" and self.device.type != "cuda":
            raise UserError("--precision fp16: PyTorch runs fp16 on CUDA only (use bf16 on the CPU)")
        self.use_graph = self.cfg.options["cuda_graph"] == "on"
        if self.use_graph and self.cfg.options["compile"] != "off":
            raise UserError(
                "--cuda-graph with --compile: choose one "
                "(--compile reduce-overhead captures CUDA graphs itself)"
            )
        if self.use_graph and self.device.type != "cuda":
            raise UserError("--cuda-graph: CUDA graphs need --device cuda")
        self.graphs: dict[int, tuple[Any, Any]] = {}
        self.math = mathmode.torch_math(torch, self.device.type, self.cfg.precision)
        self.dtype = getattr(torch, DTYPES[self.cfg.precision])
        if self.user:
            model = self.load_user()
        elif self.artifact.checkpoint:
            from dlbench.models.native import pytorch as native

            model = native.load(self.spec, self.artifact.checkpoint)
        else:
            model = self.spec.build("pytorch", seed=self.cfg.seed)
        if not self.user:  # a user's model comes in eval mode where it has one
            model = model.eval()
        self.model = model.to(self.device, self.dtype)
        # NHWC: the layout oneDNN and cuDNN convolutions prefer; a model whose weights
        # have no 4-D tensor is left as it is (to() ignores the format for them).
        self.layout = (
            torch.channels_last if self.cfg.options["channels_last"] == "on" else torch.contiguous_format
        )
        self.model = self.model.to(memory_format=self.layout)
        self.compiled = self.cfg.options["compile"] != "off"
        if self.compiled:
            mode = None if self.cfg.options["compile"] == "default" else self.cfg.options["compile"]
            self.model = torch.compile(self.model, mode=mode)

    def prepare(self, feeds: dict[str, Any]) -> Any:
        # Floats take the run's precision; integer inputs (token ids) keep their dtype.
        out = [
            self.torch.from_numpy(x).to(self.device, self.dtype if x.dtype.kind == "f" else None)
            for x in feeds.values()
        ]
        return [t.contiguous(memory_format=self.layout) if t.dim() == 4 else t for t in out]

    def run(self, x: Any) -> None:
        if self.use_graph:
            graph, self._out = self.graphs.get(id(x)) or self._capture(x)
            graph.replay()
            return
        with self.torch.inference_mode():
            self._out = self.model(*x)

    def _capture(self, x: Any) -> tuple[Any, Any]:
        """One graph per prepared batch: replay reads the same input buffers (the harness
        prepares a batch once and times it over and over) and writes the same outputs."""
        torch = self.torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.inference_mode():
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.model(*x)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = self.model(*x)
        self.graphs[id(x)] = (graph, out)
        return graph, out

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def outputs(self) -> dict[str, Any]:
        if self.user:
            from dlbench.models.user.pytorch import to_numpy

            return to_numpy(self._out)
        return {"logits": self._out.float().cpu().numpy()}

    def timed_region(self) -> dict[str, Any]:
        how = "torch.compile'd module" if self.compiled else "eager module"
        if self.use_graph:
            how = "a CUDA graph of the eager module, graph.replay()"
        sync = (
            "torch.cuda.synchronize"
            if self.device.type == "cuda"
            else "none needed: CPU ops return when done"
        )
        return region(
            f"model(x) under torch.inference_mode ({how}), input tensor already on "
            f"{self.device.type}; {sync}",
            host_device_copies=False,
            io_binding=False,
            cuda_graph=self.use_graph,
            sync=sync,
        )

    def runtime(self) -> dict[str, Any]:
        torch = self.torch
        param = next(iter(self.model.parameters()), None)
        out_device = None
        if hasattr(self, "_out"):
            if self.user:
                from dlbench.models.user.pytorch import flatten

                first = next(iter(flatten(self._out).values()), None)
            else:
                first = self._out
            out_device = first.device.type if first is not None else None
        info = {
            "device_kind": param.device.type if param is not None else out_device,
            "output_device": out_device,
            "dtype": str(param.dtype).removeprefix("torch.") if param is not None else None,
            "torch": torch.__version__,
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "compile": self.cfg.options["compile"],
            "cuda_graph": self.use_graph,
            "math_mode": self.math,
            **self.describe(),
        }
        if self.device.type == "cuda":
            info["device_name"] = torch.cuda.get_device_name(self.device)
            info["cuda"] = torch.version.cuda
        return info

    def verify(self, runtime: dict[str, Any]) -> None:
        super().verify(runtime)
        if runtime["output_device"] not in (None, self.device.type):
            raise FellBack(f"outputs came back on {runtime['output_device']}, asked for {self.device.type}")

    def device_memory_mb(self) -> float | None:
        if self.device.type != "cuda":
            return None
        return self.torch.cuda.max_memory_allocated(self.device) / 2**20


class PyTorch(NativeFramework):
    framework = "pytorch"
    formats = native_formats("pytorch")
    inter_op_pool = True
    options = (
        Option(
            "compile",
            "off",
            ("off", "default", "reduce-overhead", "max-autotune"),
            help="torch.compile mode (off: eager)",
            const="default",
            # max-autotune's own search takes minutes: a tune tries the compile itself
            tune_on=("cpu", "cuda"),
            tune_values=("default",),
        ),
        Option(
            "cuda_graph",
            "off",
            ON_OFF,
            help="replay model(x) as a CUDA graph (GPU)",
            switch=True,
            tune_on=("cuda",),
        ),
        Option(
            "channels_last",
            "off",
            ON_OFF,
            help="the model and 4-D inputs in channels-last (NHWC) memory format",
            switch=True,
            tune_on=("cpu", "cuda"),
        ),
    )

    def precisions(self, device):
        return with_tf32(("fp32", "fp16", "bf16"), device) if device == "cuda" else ("fp32", "bf16")

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return TorchRunner(artifact, cfg)


BACKEND = PyTorch(
    "pytorch", "PyTorch native inference (eager, torch.compile or CUDA graphs)", "torch", "torch", "pytorch"
)
