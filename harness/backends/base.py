"""What every inference backend declares about itself.

Availability is decided from what is installed and what hardware exists,
without importing the engine, so ``dlbench backends`` is fast and can explain
itself: "package missing, install dlbench[onnx]", "no NVIDIA GPU".
"""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.fingerprint import fingerprint
from harness.frameworks import distribution_version, is_installed


@dataclass
class Availability:
    name: str
    available: bool
    devices: list[str] = field(default_factory=list)
    reason: str = ""
    version: str | None = None


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    module: str            # the import the backend needs
    distribution: str      # the package that provides it
    extra: str             # the dlbench extra that installs it

    def missing(self) -> str | None:
        if not is_installed(self.module):
            return f"{self.distribution} is not installed: pip install 'dlbench[{self.extra}]'"
        return None

    def devices(self) -> list[str]:
        """Devices this machine offers to the backend (override per backend)."""
        return ["cpu"]

    def availability(self) -> Availability:
        version = distribution_version(self.distribution)
        why = self.missing()
        if why:
            return Availability(self.name, False, [], why, version)
        devices = self.devices()
        if not devices:
            return Availability(self.name, False, [], self.no_device_reason(), version)
        return Availability(self.name, True, devices, self.description, version)

    def no_device_reason(self) -> str:
        return "no usable device on this machine"


def has_nvidia_gpu() -> bool:
    return bool(fingerprint()["gpus"])


def has_ascend() -> bool:
    return bool(fingerprint()["ascend"])
