"""MindSpore on a Huawei Ascend NPU (GRAPH_MODE, MindIR or the native network).

The runner is the ``mindspore`` backend's on the Ascend target, with the
NPU chosen by ``--device-id``; elsewhere the backend is unavailable and says
why (no /dev/davinci* device).
"""
from __future__ import annotations

from dlbench.harness.backends.base import MINDIR, ArtifactRef, Backend, RunConfig, Runner, has_ascend
from dlbench.harness.backends.mindspore import MsRunner
from dlbench.harness.backends.native import native_formats


class Ascend(Backend):
    framework = "mindspore"
    formats = native_formats("mindspore") + (MINDIR,)

    def devices(self):
        return ["ascend"] if has_ascend() else []

    def no_device_reason(self):
        return "no Ascend NPU on this machine (no /dev/davinci* device)"

    def default_device(self) -> str:
        return "ascend"

    def precisions(self, device):
        return ("fp32", "fp16")

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return MsRunner(artifact, cfg)


BACKEND = Ascend("ascend", "MindSpore on an Ascend NPU", "mindspore", "mindspore", "mindspore")
