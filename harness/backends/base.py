"""What every inference backend declares about itself, and the runner it provides.

Two halves, both importable without any engine:

* ``Backend`` is what the parent process knows: whether the backend can run
  here (decided from installed packages and hardware, so ``dlbench backends``
  is fast and says why not: "package missing, install dlbench[onnx]", "no
  NVIDIA GPU"), which artifact formats, devices, precisions and options it
  takes, and the environment its child process must start with.
* ``Runner`` is what the cell's child process drives (Polygraphy's runner
  idea, with the clock kept outside): ``load`` the artifact for a device and
  precision, ``prepare`` a batch of inputs on the device, then ``run`` one
  batch and ``sync`` until the device is done.  The measurement loop times
  exactly ``run`` + ``sync``; each runner states what that region contains in
  ``timed_region()``, which is stored with every record, so "latency" means
  the same thing on every backend or says how it differs.

A runner also reports what actually ran (``runtime``) and ``verify``
refuses a silent fallback: ONNX Runtime that quietly put the graph on the
CPU, a tensor that stayed on the host.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dlbench.core.errors import UserError
from dlbench.core.tensors import TensorInfo
from dlbench.harness.cells import mathmode
from dlbench.harness.cells.mathmode import TF32, tf32_reason
from dlbench.harness.machine.frameworks import distribution_version, is_installed
from dlbench.harness.machine.hardware import ascend_npus, nvidia_gpus


@dataclass
class Availability:
    name: str
    available: bool
    devices: list[str] = field(default_factory=list)
    reason: str = ""
    version: str | None = None


@dataclass(frozen=True)
class Option:
    """A backend-specific setting (``--backend-option NAME=VALUE`` or a named flag)."""

    name: str
    default: Any
    choices: tuple[Any, ...] | None = None
    kind: type = str
    help: str = ""
    # Its bench flag's form: ``switch`` makes an on/off option ``--NAME`` / ``--no-NAME``;
    # ``const`` lets ``--NAME`` stand alone for that value (``--compile``: default mode).
    switch: bool = False
    const: Any = None
    # ``dlbench tune`` searches it on these devices, over ``tune_values`` or else its
    # choices: a speed setting only, never one that changes what is timed (I/O binding).
    tune_on: tuple[str, ...] = ()
    tune_values: tuple[Any, ...] | None = None

    def searched(self, device: str) -> tuple[Any, ...]:
        """The values a tune on ``device`` tries, the default first; none if not searched."""
        if device not in self.tune_on:
            return ()
        values = self.tune_values if self.tune_values is not None else self.choices or ()
        return tuple(dict.fromkeys((self.default, *values)))

    def parse(self, backend: str, raw: Any) -> Any:
        try:
            value = self.kind(raw)
        except (TypeError, ValueError):
            raise UserError(f"{backend} option {self.name}: {raw!r} is not a {self.kind.__name__}") from None
        if self.choices is not None and value not in self.choices:
            raise UserError(
                f"{backend} option {self.name}: {raw!r} is not one of {', '.join(map(str, self.choices))}"
            )
        return value


ON_OFF = ("on", "off")


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    module: str  # the import the backend needs
    distribution: str  # the package that provides it
    more_packages: ClassVar[tuple[str, ...]] = ()  # others that change its numbers (a GPU build)
    extra: str  # the dlbench extra that installs it

    # What the backend takes; subclasses override.
    formats: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    # The native framework whose version a record carries (native backends).
    framework: ClassVar[str | None] = None
    # Verification (dlbench verify, build, export) runs the artifact on this device ...
    verify_device: ClassVar[str] = "cpu"
    # ... and in the parent process where the engine is safe to load there (no framework,
    # no device context): a cell costs a process start per verified file.
    verify_in_parent: ClassVar[bool] = False
    # Whether it has an inter-op thread pool (ONNX Runtime's parallel execution mode,
    # PyTorch's and TensorFlow's pools): ``dlbench tune`` searches inter-op threads there.
    inter_op_pool: ClassVar[bool] = False

    def missing(self) -> str | None:
        if not is_installed(self.module):
            return f"{self.distribution} is not installed: pip install 'dlbench[{self.extra}]'"
        return None

    def devices(self) -> list[str]:
        """Devices this machine offers to the backend (override per backend)."""
        return ["cpu"]

    def availability(self) -> Availability:
        version = self.version()
        why = self.missing()
        if why:
            return Availability(self.name, False, [], why, version)
        devices = self.devices()
        if not devices:
            return Availability(self.name, False, [], self.no_device_reason(), version)
        return Availability(self.name, True, devices, self.description, version)

    def no_device_reason(self) -> str:
        return "no usable device on this machine"

    def version(self) -> str | None:
        return distribution_version(self.distribution)

    def packages(self) -> tuple[str, ...]:
        """Every distribution whose version can change this backend's numbers (each
        record's fingerprint lists them); more than one where a backend has variants."""
        return (self.distribution, *self.more_packages)

    # --- what a sweep asks of the backend, in the parent (no engine import) ---

    def precisions(self, device: str) -> tuple[str, ...]:
        """Precisions this backend can run on ``device``; "auto" is the artifact's own.
        ``tf32`` is float32 in TensorFloat-32 math: see ``with_tf32``."""
        return ("fp32",)

    def precision_reason(self, device: str, precision: str) -> str:
        """Why ``precision`` is not among ``precisions(device)``, in one line."""
        if precision == TF32:
            return tf32_reason(device) or f"{self.name} has no TF32 mode"
        return f"{self.name} on {device} runs {', '.join(p for p in self.precisions(device) if p != 'auto')}"

    def default_device(self) -> str:
        devices = self.devices()
        return devices[0] if devices else "cpu"

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def own_options(self, given: dict[str, Any]) -> dict[str, Any]:
        """The options of ``given`` this backend declares: a request naming several backends
        (or a tuning point, or a matrix) gives each its own, and bench refuses the rest."""
        return {k: v for k, v in given.items() if self.option(k) is not None}

    def verify_options(self, artifact: ArtifactRef) -> dict[str, Any]:
        """Options a verification runs ``artifact`` with, over the defaults: a setting a
        benchmark can ask for too, never one of verification's own.  A framework that
        compiles its call once per input shape runs its reference eagerly here, because a
        verification needs each batch size's outputs once, not fast."""
        return {}

    def conflict(self, options: dict[str, Any]) -> str | None:
        """Why these resolved options cannot run together (None: they can): said before any
        cell starts, where a cell would only fail on it."""
        return None

    def resolve_options(self, given: dict[str, Any]) -> dict[str, Any]:
        """This backend's options: defaults, overridden by the ones it declares in ``given``."""
        return {
            o.name: o.parse(self.name, given[o.name]) if o.name in given else o.default for o in self.options
        }

    def environment(self, options: dict[str, Any], intra_op: int, inter_op: int) -> dict[str, str]:
        """Variables the child needs before its engine loads (read once, at import)."""
        return {}

    def math_environment(self, device: str, precision: str, options: dict[str, Any]) -> dict[str, str]:
        """The math variables a cell starts with (``NVIDIA_TF32_OVERRIDE=0`` for float32 on
        a GPU, which also reaches libraries no framework switch does); a backend whose own
        switch covers every library it calls, and is read back, may ask for none."""
        return mathmode.environment(device, precision)

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        raise UserError(f"backend {self.name} cannot run models in this version of dlbench")


@dataclass
class ArtifactRef:
    """What the child needs to find and describe the model it loads."""

    path: str | None  # absolute path, None for a zoo model
    format: str
    model: str  # zoo name, or the file's stem
    framework: str | None = None
    checkpoint: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # sidecar / manifest contents


@dataclass
class RunConfig:
    device: str  # cpu | cuda | ascend
    precision: str  # fp32 | tf32 | fp16 | bf16 | int8 (harness.cells.mathmode: what fp32 means)
    intra_op_threads: int
    inter_op_threads: int
    device_id: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # Batch range this runner will be asked for (engines build profiles for it).
    max_batch: int = 1
    min_batch: int = 1
    # Fixed non-batch input shapes the user gave (--shape), for engine builders.
    shapes: dict[str, list[int]] = field(default_factory=dict)


class FellBack(RuntimeError):
    """The engine ran somewhere other than asked; the cell fails with this message."""


class Runner(ABC):
    """One model loaded on one device.  The measurement loop owns the clock.

    ``prepare`` returns an opaque handle for one batch of inputs, resident
    on the device; ``run(handle)`` must not copy inputs unless the timed
    region says so, and ``sync`` must not return before the device finished
    the work ``run`` queued.
    """

    def __init__(self, artifact: ArtifactRef, cfg: RunConfig):
        self.artifact, self.cfg = artifact, cfg

    @abstractmethod
    def load(self) -> None:
        """Load or build the model on the device (timed as cold start, apart)."""

    @abstractmethod
    def inputs(self) -> list[TensorInfo]:
        """The model's inputs, channels-first for zoo images."""

    @abstractmethod
    def prepare(self, feeds: dict[str, Any]) -> Any:
        """Place one batch (numpy arrays by input name) on the device."""

    @abstractmethod
    def run(self, handle: Any) -> None:
        """Queue (or run) one batch."""

    def sync(self) -> None:
        """Wait until the device has finished; a no-op where ``run`` blocks."""

    def outputs(self) -> dict[str, Any]:
        """The last run's outputs as numpy arrays (for checks, never timed)."""
        return {}

    @abstractmethod
    def timed_region(self) -> dict[str, Any]:
        """What the timed ``run`` + ``sync`` contains, in words and flags."""

    @abstractmethod
    def runtime(self) -> dict[str, Any]:
        """What actually ran: device, providers, threads, versions."""

    def verify(self, runtime: dict[str, Any]) -> None:
        """Raise FellBack if ``runtime`` shows the work ran elsewhere than asked."""
        ran = str(runtime.get("device_kind", "")).lower()
        if ran and ran != self.cfg.device:
            raise FellBack(f"asked for {self.cfg.device}, the backend ran on {ran}")

    def device_times(self) -> dict[str, list[float]]:
        """Per-iteration device-side times in ms (CUDA events), where the backend has them."""
        return {}

    def reset_device_times(self) -> None:
        """Forget device times recorded so far (warm-up)."""

    def device_memory_mb(self) -> float | None:
        """Peak device memory this process used, where the backend can tell."""
        return None

    def close(self) -> None:
        """Release the engine (the process ends right after; override if it matters)."""

    def network(self) -> Any:
        """The framework's network exactly as the checkpoint loads it (float32, unwrapped),
        or None where this runner holds something else.  The export cell exports the very
        network its reference outputs came from instead of loading the checkpoint again
        (2 s of a TensorFlow cell for a small DenseNet)."""
        return None


def with_tf32(precisions: tuple[str, ...], device: str) -> tuple[str, ...]:
    """``precisions`` plus ``tf32`` where this machine's GPU has TensorFloat-32 (compute
    capability 8.0 or newer); elsewhere a tf32 cell is refused with ``tf32_reason``."""
    return precisions + (TF32,) if tf32_reason(device) is None else precisions


def has_nvidia_gpu() -> bool:
    return bool(nvidia_gpus())


def has_ascend() -> bool:
    return bool(ascend_npus())


# The timed region every backend starts from; runners state where they differ.
STANDARD_REGION = (
    "from the start of the backend's run call, inputs already resident on the "
    "device, until the outputs are complete on the device (device synchronized); "
    "outputs stay where the engine put them"
)


def region(summary: str, **flags: Any) -> dict[str, Any]:
    return {"definition": STANDARD_REGION, "summary": summary, **flags}
