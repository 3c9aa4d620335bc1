"""MindSpore itself as an inference backend (GRAPH_MODE; CPU, GPU or, via ``ascend``, NPU).

Runs the zoo network from a ``dlbench train`` checkpoint (or random weights
for a zoo name) or a MindIR graph (``mindspore.load`` + ``nn.GraphCell``),
compiled in GRAPH_MODE; ``--eager`` runs a network (not a MindIR) op by op in
PYNATIVE_MODE instead, as verification's reference does.  Inputs are MindSpore
tensors moved to the device before timing where the device is not the host:
``Tensor.move_to`` is documented for PyNative mode only, so the copy runs with
the context switched to PYNATIVE_MODE and back (``place``), and each input's
``device`` says where it landed.  ``sync`` is ``mindspore.runtime.synchronize``.  fp16
is ``amp.auto_mixed_precision`` at level "auto", as in training; float32 is
IEEE float32 (on Ascend, CANN's ``must_keep_origin_dtype`` with HF32 off,
set and read back by ``harness.cells.mathmode``).

What ran where is read from the tensors, not from the configured target: the
outputs' ``Tensor.device`` ("CPU", "Ascend:0") decides the fallback check.
"""

from __future__ import annotations

import os
from typing import Any

from dlbench.core.devices import training_name
from dlbench.core.errors import UserError
from dlbench.harness.backends.base import ON_OFF, ArtifactRef, Option, RunConfig, Runner, TensorInfo, region
from dlbench.harness.backends.native import NativeFramework, NativeRunner, native_formats
from dlbench.harness.cells import mathmode
from dlbench.harness.formats import MINDIR

TARGETS = {"cpu": "CPU", "cuda": "GPU", "ascend": "Ascend"}
KINDS = {v: k for k, v in TARGETS.items()}


def tensor_device(tensor: Any) -> str | None:
    """Where a MindSpore tensor lives, as a dlbench device ("cpu", "ascend"), from its own
    ``Tensor.device`` ("CPU", "Ascend:0"); None where this MindSpore cannot tell."""
    where = getattr(tensor, "device", None)
    if not isinstance(where, str) or not where:
        return None
    target = where.split(":")[0]
    return KINDS.get(target, target.lower())


def place(ms, tensors: list, target: str) -> list:
    """Copy host tensors to ``target`` ahead of the timed region.  ``Tensor.move_to`` is
    documented for PyNative mode only, so the context is PYNATIVE_MODE for the copy and
    back to what it was after (MindSpore switches modes at run time; a network compiled
    in GRAPH_MODE stays compiled)."""
    mode = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        return [t.move_to(target, blocking=True) for t in tensors]
    finally:
        ms.set_context(mode=mode)


class MsRunner(NativeRunner):
    framework = "mindspore"

    def load(self) -> None:
        os.environ.setdefault("GLOG_v", "3")
        import mindspore as ms
        from mindspore import nn

        self.ms = ms
        target = TARGETS[self.cfg.device]
        if self.cfg.device != "cpu":
            ctx_name = training_name(self.cfg.device)
            if not getattr(ms.device_context, ctx_name).is_available():
                raise UserError(
                    f"--device {self.cfg.device}: this MindSpore {ms.__version__} cannot use {target}"
                )
        ms.set_device(target, self.cfg.device_id)
        self.math = mathmode.mindspore_math(ms, target, self.cfg.precision)
        for setter, value in (
            (ms.device_context.cpu.op_tuning.threads_num, self.cfg.intra_op_threads),
            (ms.runtime.dispatch_threads_num, self.cfg.inter_op_threads),
        ):
            try:
                setter(value)
            except RuntimeError:  # settable once per process
                pass
        self.eager = self.cfg.options.get("eager") == "on"
        if self.eager and self.artifact.format == MINDIR:
            raise UserError("--eager: a MindIR file is a compiled graph, run in GRAPH_MODE only")
        ms.set_context(mode=ms.PYNATIVE_MODE if self.eager else ms.GRAPH_MODE)
        if self.artifact.format == MINDIR:
            self.net = nn.GraphCell(ms.load(self.artifact.path))
        else:
            if self.user:
                net = self.load_user()
            elif self.artifact.checkpoint:
                from dlbench.models.native import mindspore as native

                net = native.load(self.spec, self.artifact.checkpoint)
            else:
                net = self.spec.build("mindspore", seed=self.cfg.seed)
                net.set_train(False)
            if self.cfg.precision == "fp16":
                net = ms.amp.auto_mixed_precision(net, "auto", dtype=ms.float16)
            self.net = net
        self.target = target

    def inputs(self) -> list[TensorInfo]:
        if self.artifact.format == MINDIR:
            shapes = self.artifact.meta.get("inputs")
            if not shapes:
                raise UserError(
                    f"{self.artifact.path}: a MindIR graph needs its input shapes "
                    f"from a sidecar (model.mindir.json with 'inputs')"
                )
            return [TensorInfo(i["name"], i.get("dtype", "float32"), tuple(i["shape"])) for i in shapes]
        return super().inputs()

    def prepare(self, feeds: dict[str, Any]) -> Any:
        tensors = [self.ms.Tensor(x) for x in feeds.values()]
        if self.target != "CPU":
            tensors = place(self.ms, tensors, self.target)
        self.input_devices = [tensor_device(t) for t in tensors]
        return tensors

    def run(self, tensors: Any) -> None:
        self._out = self.net(*tensors)

    def sync(self) -> None:
        self.ms.runtime.synchronize()

    def outputs(self) -> dict[str, Any]:
        if self.user:
            from dlbench.models.user.mindspore import to_numpy

            return to_numpy(self._out)
        out = self._out if isinstance(self._out, (tuple, list)) else [self._out]
        return {f"output_{i}": o.asnumpy() for i, o in enumerate(out)}

    def timed_region(self) -> dict[str, Any]:
        copies = any(d != self.cfg.device for d in getattr(self, "input_devices", []))
        return region(
            f"net(*inputs) {'run op by op in PYNATIVE_MODE' if self.eager else 'compiled in GRAPH_MODE'} "
            f"on {self.target}, then "
            f"mindspore.runtime.synchronize"
            + (
                "; the inputs are not (known to be) on the device ahead of the "
                "run, so the region may include their host-to-device copy"
                if copies
                else ""
            ),
            host_device_copies=copies,
            io_binding=False,
            cuda_graph=False,
            sync="mindspore.runtime.synchronize",
        )

    def runtime(self) -> dict[str, Any]:
        ms = self.ms
        target = ms.get_current_device().device_target
        out = getattr(self, "_out", None)
        outs = [] if out is None else out if isinstance(out, (tuple, list)) else [out]
        where = sorted({d for d in (tensor_device(o) for o in outs) if d})
        # The outputs' own location decides; the configured target only where none is known.
        kind = ",".join(where) if where else KINDS.get(target, target.lower())
        info = {
            "device_kind": kind,
            "device_target": target,
            "output_device": where,
            "device_source": "output tensors" if where else "configured target",
            "input_device": getattr(self, "input_devices", None),
            "mindspore": ms.__version__,
            "mode": "GRAPH_MODE" if ms.get_context("mode") == ms.GRAPH_MODE else "PYNATIVE_MODE",
            "device_id": self.cfg.device_id,
            "precision": self.cfg.precision,
            "math_mode": self.math,
        }
        if self.artifact.format != MINDIR:
            info.update(self.describe())
        return info

    def device_memory_mb(self) -> float | None:
        if self.target == "CPU":
            return None
        try:
            return self.ms.runtime.max_memory_allocated() / 2**20
        except (RuntimeError, AttributeError):
            return None


class MindSpore(NativeFramework):
    framework = "mindspore"
    formats = native_formats("mindspore") + (MINDIR,)
    options: tuple[Option, ...] = (
        Option(
            "eager",
            "off",
            ON_OFF,
            help="run the network in PYNATIVE_MODE, op by op, not compiled in GRAPH_MODE "
            "(verification's reference runs so)",
            switch=True,
        ),
    )

    def verify_options(self, artifact: ArtifactRef) -> dict[str, Any]:
        # A MindIR is a compiled graph: GRAPH_MODE is the only way it runs.
        return {} if artifact.format == MINDIR else {"eager": "on"}

    def precisions(self, device):
        return ("fp32", "fp16")

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return MsRunner(artifact, cfg)


BACKEND = MindSpore(
    "mindspore", "MindSpore native inference (GRAPH_MODE)", "mindspore", "mindspore", "mindspore"
)
