"""The native frameworks as inference backends (eager/graph execution, no engine).

They run a zoo network: a ``dlbench train`` checkpoint (its manifest names
the model) or, given a zoo name, the network with seeded random weights.
Inputs are the spec's, channels-first; a framework whose network is
channels-last converts while preparing, outside the timed region.
"""
from __future__ import annotations

from typing import Any

from dlbench.harness.backends.base import (ZOO, Backend, Runner, TensorInfo, checkpoint_format,
                                   has_ascend, has_nvidia_gpu)
from dlbench.harness.frameworks import distribution_version


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


def native_formats(framework: str) -> tuple[str, ...]:
    return (checkpoint_format(framework), ZOO)


class NativeRunner(Runner):
    """Shared by the framework runners: the zoo spec and its input signature."""

    framework = ""

    @property
    def spec(self):
        from dlbench.models.registry import get_model

        return get_model(self.artifact.model)

    def inputs(self) -> list[TensorInfo]:
        return [TensorInfo(i.name, i.dtype, (None, *i.shape)) for i in self.spec.inputs]

    def weights(self) -> str:
        return self.artifact.checkpoint or f"random (seed {self.cfg.seed})"

    def describe(self) -> dict[str, Any]:
        return {"model": self.spec.name, "weights": self.weights()}
