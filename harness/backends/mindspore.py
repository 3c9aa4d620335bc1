"""MindSpore itself as an inference backend (GRAPH_MODE; CPU, GPU or, via ``ascend``, NPU).

Runs the zoo network from a ``dlbench train`` checkpoint (or random weights
for a zoo name) or a MindIR graph (``mindspore.load`` + ``nn.GraphCell``),
compiled in GRAPH_MODE.  Inputs are MindSpore tensors moved to the device
before timing (``Tensor.move_to``) where the device is not the host;
``sync`` is ``mindspore.runtime.synchronize``.  fp16 is
``amp.auto_mixed_precision`` at level "auto", as in training.
"""
from __future__ import annotations

import os
from typing import Any

from dlbench.harness.backends.base import (MINDIR, ArtifactRef, Option, RunConfig, Runner, TensorInfo,
                                   region)
from dlbench.harness.backends.native import NativeFramework, NativeRunner, native_formats
from dlbench.models.errors import UserError

TARGETS = {"cpu": "CPU", "cuda": "GPU", "ascend": "Ascend"}


class MsRunner(NativeRunner):
    framework = "mindspore"

    def load(self) -> None:
        os.environ.setdefault("GLOG_v", "3")
        import mindspore as ms
        from mindspore import nn

        self.ms = ms
        target = TARGETS[self.cfg.device]
        if self.cfg.device != "cpu":
            ctx_name = {"cuda": "gpu", "ascend": "ascend"}[self.cfg.device]
            if not getattr(ms.device_context, ctx_name).is_available():
                raise UserError(f"--device {self.cfg.device}: this MindSpore {ms.__version__} "
                                f"cannot use {target}")
        ms.set_device(target, self.cfg.device_id)
        for setter, value in ((ms.device_context.cpu.op_tuning.threads_num,
                               self.cfg.intra_op_threads),
                              (ms.runtime.dispatch_threads_num, self.cfg.inter_op_threads)):
            try:
                setter(value)
            except RuntimeError:        # settable once per process
                pass
        ms.set_context(mode=ms.GRAPH_MODE)
        if self.artifact.format == MINDIR:
            self.net = nn.GraphCell(ms.load(self.artifact.path))
        else:
            spec = self.spec
            if self.artifact.checkpoint:
                from dlbench.models.native import mindspore as native
                net = native.load(spec, self.artifact.checkpoint)
            else:
                net = spec.build("mindspore", seed=self.cfg.seed)
                net.set_train(False)
            if self.cfg.precision == "fp16":
                net = ms.amp.auto_mixed_precision(net, "auto", dtype=ms.float16)
            self.net = net
        self.target = target

    def inputs(self) -> list[TensorInfo]:
        if self.artifact.format == MINDIR:
            shapes = self.artifact.meta.get("inputs")
            if not shapes:
                raise UserError(f"{self.artifact.path}: a MindIR graph needs its input shapes "
                                f"from a sidecar (model.mindir.json with 'inputs')")
            return [TensorInfo(i["name"], i.get("dtype", "float32"), tuple(i["shape"]))
                    for i in shapes]
        return super().inputs()

    def prepare(self, feeds: dict[str, Any]) -> Any:
        tensors = [self.ms.Tensor(x) for x in feeds.values()]
        self.moved = False
        if self.target != "CPU":
            moved = []
            for t in tensors:
                if hasattr(t, "move_to"):
                    moved.append(t.move_to(self.target, blocking=True))
                    self.moved = True
                else:
                    moved.append(t)
            tensors = moved
        return tensors

    def run(self, tensors: Any) -> None:
        self._out = self.net(*tensors)

    def sync(self) -> None:
        self.ms.runtime.synchronize()

    def outputs(self) -> dict[str, Any]:
        out = self._out if isinstance(self._out, (tuple, list)) else [self._out]
        return {f"output_{i}": o.asnumpy() for i, o in enumerate(out)}

    def timed_region(self) -> dict[str, Any]:
        copies = self.target != "CPU" and not getattr(self, "moved", True)
        return region(f"net(*inputs) compiled in GRAPH_MODE on {self.target}, then "
                      f"mindspore.runtime.synchronize"
                      + ("; inputs could not be moved ahead, so the region includes their "
                         "host-to-device copy" if copies else ""),
                      host_device_copies=copies, io_binding=False, cuda_graph=False,
                      sync="mindspore.runtime.synchronize")

    def runtime(self) -> dict[str, Any]:
        ms = self.ms
        target = ms.get_current_device().device_target
        kind = {"CPU": "cpu", "GPU": "cuda", "Ascend": "ascend"}.get(target, target.lower())
        info = {"device_kind": kind, "device_target": target, "mindspore": ms.__version__,
                "mode": "GRAPH_MODE" if ms.get_context("mode") == ms.GRAPH_MODE else "PYNATIVE_MODE",
                "device_id": self.cfg.device_id, "precision": self.cfg.precision}
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
    options: tuple[Option, ...] = ()

    def precisions(self, device):
        return ("fp32", "fp16")

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return MsRunner(artifact, cfg)


BACKEND = MindSpore("mindspore", "MindSpore native inference (GRAPH_MODE)", "mindspore",
                    "mindspore", "mindspore")
