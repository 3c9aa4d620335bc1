"""MindSpore on a Huawei Ascend NPU (GRAPH_MODE, MindIR or the native network).

The runner is the ``mindspore`` backend's on the Ascend target, with the
NPU chosen by ``--device-id``; elsewhere the backend is unavailable and says
why (no /dev/davinci* device).  From that runner: inputs moved to the NPU
ahead of the timed region in a way MindSpore documents (``Tensor.move_to``,
PyNative mode), the fallback check read from the output tensors' own device,
and fp32 kept IEEE float32 (CANN ``must_keep_origin_dtype``, HF32 off).
"""

from __future__ import annotations

from dlbench.harness.backends.base import ArtifactRef, Backend, RunConfig, Runner, has_ascend
from dlbench.harness.backends.mindspore import MsRunner
from dlbench.harness.backends.native import native_formats
from dlbench.harness.formats import MINDIR


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
