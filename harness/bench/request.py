"""What a ``dlbench bench`` asks for, and the rules it must meet before anything is resolved.

The request is the one thing the CLI, ``dlbench run`` and the Python API all
build; its rules are checked here, once, so every caller refuses the same input
with the same line.  Rules that need the artifacts or the backends (formats,
devices, input names) belong to the plan (``bench.plan``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlbench.core.devices import INFERENCE as DEVICES
from dlbench.core.devices import inference_name
from dlbench.core.errors import UserError
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.scenarios import get_scenario
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.cells.allocator import check as check_allocator
from dlbench.harness.cells.threads import usable_cores
from dlbench.harness.executors import DEFAULT_EXECUTOR
from dlbench.harness.executors import check as check_executor
from dlbench.harness.stats import BETWEEN_PROCESSES_THRESHOLD, WITHIN_PROCESS_THRESHOLD


def split(values, kind=str) -> list:
    """Comma lists and repeated flags alike ("1,8" "32" -> [1, 8, 32]), first occurrence kept."""
    out = []
    for v in values or []:
        for part in str(v).split(","):
            if part.strip():
                try:
                    out.append(kind(part.strip()))
                except ValueError:
                    raise UserError(f"{part.strip()!r} is not a valid {kind.__name__}") from None
    return list(dict.fromkeys(out))


@dataclass
class BenchRequest:
    artifacts: list[str]
    backends: list[str]
    devices: list[str] | None = None
    precisions: list[str] | None = None
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    threads: list[int] | None = None
    inter_op_threads: int | None = None
    # The memory allocator of every cell's process (harness.cells.allocator: why tuned is the default).
    allocator: str = DEFAULT_ALLOCATOR
    # --with PACKAGE==VERSION: the cells run in each of these environments instead of the
    # installed packages (harness.cells.envs); a sweep axis.
    with_specs: list[str] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=lambda: ["offline"])
    rule: StopRule = field(default_factory=StopRule)
    repeats: int = 1
    # Stability rules (harness.stats.stability): IQR / median of latency within a process,
    # and (max - min) / median of throughput between the --repeats processes.
    iqr_threshold: float = WITHIN_PROCESS_THRESHOLD
    repeat_spread_threshold: float = BETWEEN_PROCESSES_THRESHOLD
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    int_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    # --input: a value (int, float, bool) for every element, or a .npy path (bench.given).
    inputs: dict[str, int | float | bool | str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    device_id: int = 0
    seed: int = 0
    qps: list[float] | None = None
    max_wait_ms: float = 2.0
    latency_bound_ms: float | None = None
    model: str | None = None
    # A user's model built by code (MODULE:CALLABLE or FILE.py:CALLABLE), and its weights.
    model_from: str | None = None
    weights: str | None = None
    timeout: float | None = None
    resume: bool = False
    # Resume within one run only (``dlbench run --resume``): skip the cells this run
    # id already stored, whatever their outcome, and nothing measured by other runs.
    resume_run: str | None = None
    db: str | None = None
    json_path: str | None = None
    argv: list[str] | None = None
    # The resolved CLI configuration (``--print-config``'s keys), kept in every record.
    config: dict[str, Any] | None = None
    # Where the cells run (harness.executors): local, ray or ray=ADDRESS; and the Ray
    # resources (NAME[=AMOUNT]) every cell's task asks for besides its threads and device.
    executor: str = DEFAULT_EXECUTOR
    ray_resources: list[str] = field(default_factory=list)

    # The defaults a field leaves open, decided in one place for the plan and the checks.
    def thread_counts(self) -> list[int]:
        return self.threads or [usable_cores()]

    def inter_op(self) -> int:
        return self.inter_op_threads or 1

    def scenario_names(self) -> list[str]:
        return self.scenarios or ["offline"]

    def backend_names(self) -> list[str]:
        return split(self.backends)

    def all_backends(self) -> bool:
        """``--backend all``: unavailable backends and devices become notes, not errors."""
        return self.backend_names() == ["all"]

    def device_names(self) -> list[str]:
        devices = [inference_name(d) for d in split(self.devices)]
        for d in devices:
            if d not in DEVICES:
                raise UserError(f"--device must be one of {', '.join(DEVICES)}, got {d!r}")
        return devices

    def precision_names(self) -> list[str]:
        return split(self.precisions) or ["auto"]

    def server_params(self) -> dict[str, Any]:
        return {"qps": self.qps, "max_wait_ms": self.max_wait_ms, "latency_bound_ms": self.latency_bound_ms}

    def check(self) -> None:
        """The request's own rules (UserError on the first broken one), before any file is read."""
        self.rule.validate()
        if not self.artifacts and not self.model_from:
            raise UserError("no artifact given (a model file, a zoo name or --model-from)")
        if self.weights and not self.model_from:
            raise UserError("--weights loads into a --model-from model; give --model-from")
        if not self.batch_sizes:
            raise UserError("--batch-sizes: give at least one batch size")
        for b in self.batch_sizes:
            if b < 1:
                raise UserError(f"--batch-sizes must be positive integers, got {b}")
        for t in self.thread_counts():
            if t < 1:
                raise UserError(f"--threads must be at least 1, got {t}")
        for flag, value, low in (
            ("--inter-op-threads", self.inter_op(), 1),
            ("--repeats", self.repeats, 1),
            ("--device-id", self.device_id, 0),
        ):
            if value < low:
                raise UserError(f"{flag} must be at least {low}, got {value}")
        if self.timeout is not None and self.timeout <= 0:
            raise UserError("--timeout must be positive")
        check_allocator(self.allocator)
        from dlbench.harness.cells.envs import check_specs

        check_specs(self.with_specs)
        check_executor(self.executor, self.ray_resources, self.device_id, self.with_specs)
        if self.iqr_threshold <= 0:
            raise UserError("--iqr-threshold must be positive")
        if self.repeat_spread_threshold <= 0:
            raise UserError("--repeat-spread-threshold must be positive")
        if self.max_wait_ms < 0:
            raise UserError("--max-wait-ms must not be negative")
        if self.latency_bound_ms is not None and self.latency_bound_ms <= 0:
            raise UserError("--latency-bound-ms must be positive")
        for q in self.qps or []:
            if q <= 0:
                raise UserError(f"--qps must be positive, got {q:g}")
        scenarios = self.scenario_names()
        for s in scenarios:
            get_scenario(s)
        if (self.qps or self.latency_bound_ms is not None) and "server" not in scenarios:
            raise UserError("--qps and --latency-bound-ms apply to --scenario server")
