"""The native frameworks as inference backends (eager/graph execution, no engine)."""
from __future__ import annotations

from harness.backends.base import Backend, has_ascend, has_nvidia_gpu
from harness.frameworks import distribution_version


class NativeFramework(Backend):
    def devices(self):
        """GPU only when the installed build can use one: a '+cpu' wheel cannot."""
        devices = ["cpu"]
        version = distribution_version(self.distribution) or ""
        if has_nvidia_gpu() and "+cpu" not in version and self.name != "mindspore":
            devices.append("cuda")
        if self.name == "mindspore" and has_ascend():
            devices.append("ascend")
        return devices
