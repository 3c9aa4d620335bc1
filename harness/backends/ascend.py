"""MindSpore on a Huawei Ascend NPU (GRAPH_MODE, MindIR or the native network)."""
from __future__ import annotations

from harness.backends.base import Backend, has_ascend


class Ascend(Backend):
    def devices(self):
        return ["ascend"] if has_ascend() else []

    def no_device_reason(self):
        return "no Ascend NPU on this machine (no /dev/davinci* device)"


BACKEND = Ascend("ascend", "MindSpore on an Ascend NPU", "mindspore", "mindspore", "mindspore")
