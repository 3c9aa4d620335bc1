"""The native frameworks as inference backends (eager/graph execution, no engine).

They run a zoo network: a ``dlbench train`` checkpoint (its manifest names
the model) or, given a zoo name, the network with seeded random weights.
Inputs are the spec's, channels-first; a framework whose network is
channels-last converts while preparing, outside the timed region.
"""

from __future__ import annotations

from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.backends.base import Backend, Runner, TensorInfo, has_ascend, has_nvidia_gpu
from dlbench.harness.formats import ZOO, checkpoint_format, user_format
from dlbench.harness.machine.frameworks import distribution_version


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
    return (checkpoint_format(framework), user_format(framework), ZOO)


class NativeRunner(Runner):
    """Shared by the framework runners: the zoo spec and its input signature, or a
    user's own model (``harness.usermodel``) with the signature its probe found."""

    framework = ""

    @property
    def user(self) -> bool:
        return self.artifact.format == user_format(self.framework)

    @property
    def spec(self):
        from dlbench.models.registry import get_model

        return get_model(self.artifact.model)

    def inputs(self) -> list[TensorInfo]:
        if self.user:
            from dlbench.harness.usermodel import signature_of

            return signature_of(self.artifact)
        return [TensorInfo(i.name, i.dtype, (None, *i.shape)) for i in self.spec.inputs]

    def load_user(self) -> Any:
        """The user's model, loaded (or built by its code) in this process."""
        from dlbench.harness.usermodel import load, source_of

        framework, model = load(source_of(self.artifact))
        if framework != self.framework:
            raise UserError(f"{self.artifact.model}: a {framework} model, not {self.framework}")
        return model

    def weights(self) -> str:
        if self.user:
            return self.artifact.checkpoint or self.artifact.meta.get("what", "its own")
        return self.artifact.checkpoint or f"random (seed {self.cfg.seed})"

    def describe(self) -> dict[str, Any]:
        if self.user:
            return {
                "model": self.artifact.model,
                "weights": self.weights(),
                "source": self.artifact.meta.get("source"),
            }
        return {"model": self.spec.name, "weights": self.weights()}
