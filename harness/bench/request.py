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
from dlbench.core.flags import comma_list, field_of, flag, nested, split
from dlbench.harness.bench.input_args import INPUTS_GROUP, InputFields, dim_texts, dims_from
from dlbench.harness.bench.measure import MEASUREMENT, StopRule
from dlbench.harness.bench.scenarios import get_scenario
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.cells.allocator import check as check_allocator
from dlbench.harness.cells.envs import with_flag
from dlbench.harness.cells.threads import usable_cores
from dlbench.harness.executors import DEFAULT_EXECUTOR, RAY_RESOURCES, executor_flag
from dlbench.harness.executors import check as check_executor
from dlbench.harness.stats import BETWEEN_PROCESSES_THRESHOLD, WITHIN_PROCESS_THRESHOLD
from dlbench.harness.store.context import DB, JSON_RECORDS, OUTPUT, RESUME_CELLS
from dlbench.harness.usermodel import model_from_flag, weights_flag
from dlbench.models.user.hub import named

SERVER = "server scenario"


@dataclass
class BenchRequest(InputFields):
    """Every field a flag sets declares that flag (``core.flags``): the parser, the
    request from it, ``--config``'s keys and a ``dlbench run`` stage's printed step are
    derived from these declarations."""

    artifacts: list[str] = flag(
        "artifacts",
        many=True,
        metavar="ARTIFACT",
        help="model.onnx, model.plan, model.mindir, a train output, a zoo name, your own "
        f"model (TorchScript, torch.export .pt2, .keras, Keras .h5, a SavedModel directory), or {named()}",
    )
    backends: list[str] = flag(
        "-b",
        "--backend",
        many=True,
        required=True,
        write=lambda names: [",".join(names)],
        help="backend name(s), repeat or comma-separate; 'all' = every available backend "
        "that takes the artifacts (see 'dlbench backends')",
    )
    devices: list[str] | None = flag(
        "--device", default=None, many=True, help="cpu, cuda or ascend (default: the backend's first device)"
    )
    device_id: int = flag("--device-id", default=0, type=int, help="GPU / NPU index (default {default})")
    precisions: list[str] | None = flag(
        "--precision",
        default=None,
        many=True,
        help="fp32, tf32, fp16, bf16, int8 (default: the artifact's own; fp32 for native); "
        "fp32 is IEEE float32, tf32 needs an NVIDIA GPU of compute capability 8.0+",
    )
    batch_sizes: list[int] = flag(
        "--batch-sizes",
        factory=lambda: [1],
        type=comma_list(int),
        help="comma-separated, e.g. 1,8,32 (default {default})",
    )
    rule: StopRule = nested(StopRule, spelled_out=True)
    threads: list[int] | None = flag(
        "--threads",
        default=None,
        type=comma_list(int),
        help="intra-op threads, comma-separated to sweep (default: physical cores)",
    )
    inter_op_threads: int | None = flag("--inter-op-threads", default=None, type=int, help="default 1")
    # The memory allocator of every cell's process (harness.cells.allocator: why tuned is the default).
    allocator: str = flag(
        "--allocator",
        default=DEFAULT_ALLOCATOR,
        metavar="NAME",
        help="memory allocator of each cell's process: system, tuned (glibc keeping freed "
        "memory), jemalloc or tcmalloc (default {default})",
    )
    # --with PACKAGE==VERSION: the cells run in each of these environments instead of the
    # installed packages (harness.cells.envs); a sweep axis.
    with_specs: list[str] = field_of(with_flag(), factory=list)
    scenarios: list[str] = flag(
        "--scenario",
        factory=lambda: ["offline"],
        many=True,
        read=split,
        help="offline, single-stream, server; repeat or comma-separate (default {default})",
    )
    repeats: int = flag(
        "--repeats",
        default=1,
        type=int,
        group=MEASUREMENT,
        help="run each cell N times (each in a fresh process); report the median and the "
        "spread (default {default})",
    )
    # Stability rules (harness.stats.stability): IQR / median of latency within a process,
    # and (max - min) / median of throughput between the --repeats processes.  --cv-threshold
    # is the old name, kept so existing scripts and configs run; the rule is on IQR / median
    # now, which one slow iteration cannot trip.
    iqr_threshold: float = flag(
        "--iqr-threshold",
        "--cv-threshold",
        default=WITHIN_PROCESS_THRESHOLD,
        type=float,
        group=MEASUREMENT,
        help="flag a cell unstable when the IQR / median of its per-iteration latencies "
        "exceeds this (default {default}; --cv-threshold is its old name)",
    )
    repeat_spread_threshold: float = flag(
        "--repeat-spread-threshold",
        default=BETWEEN_PROCESSES_THRESHOLD,
        type=float,
        group=MEASUREMENT,
        help="with --repeats: flag a cell unstable when (max - min) / median of the "
        "processes' throughputs exceeds this (default {default})",
    )
    seed: int = flag(
        "--seed",
        default=0,
        type=int,
        group=MEASUREMENT,
        help="seed of the synthesized inputs (default {default})",
    )
    dims: dict[str, list[int]] = flag(
        "--dim",
        factory=dict,
        many=True,
        group=INPUTS_GROUP,
        metavar="NAME=SIZE,SIZE",
        help="sweep a named dynamic dimension like the batch (e.g. sequence=64,128,256: "
        "every input dimension the model names 'sequence' takes each size in turn)",
        read=dims_from,
        write=dim_texts,
    )
    model: str | None = flag(
        "--model",
        default=None,
        group=INPUTS_GROUP,
        help="zoo architecture of a bare checkpoint without a manifest",
    )
    # A user's model built by code (MODULE:CALLABLE or FILE.py:CALLABLE), and its weights.
    model_from: str | None = field_of(model_from_flag("benchmark", INPUTS_GROUP), default=None)
    weights: str | None = field_of(weights_flag(INPUTS_GROUP), default=None)
    qps: list[float] | None = flag(
        "--qps",
        default=None,
        type=comma_list(float),
        group=SERVER,
        help="target rates, comma-separated (default: a ladder of fractions of the measured capacity)",
    )
    max_wait_ms: float = flag(
        "--max-wait-ms",
        default=2.0,
        type=float,
        group=SERVER,
        help="longest a query waits for a batch to fill (default {default})",
    )
    latency_bound_ms: float | None = flag(
        "--latency-bound-ms",
        default=None,
        type=float,
        group=SERVER,
        help="search for the highest rate whose p99 latency stays within this bound",
    )
    # Declared by each backend (harness.backends): their flags are generated apart
    # (commands.bench.add_backend_options), being many backends' and not the request's.
    options: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = flag(
        "--timeout", default=None, type=float, group=OUTPUT, help="seconds per cell (default none)"
    )
    resume: bool = field_of(RESUME_CELLS, default=False)
    # Resume within one run only (``dlbench run --resume``): skip the cells this run
    # id already stored, whatever their outcome, and nothing measured by other runs.
    resume_run: str | None = None
    db: str | None = field_of(DB, default=None)
    json_path: str | None = field_of(JSON_RECORDS, default=None)
    argv: list[str] | None = None
    # The resolved CLI configuration (``--print-config``'s keys), kept in every record.
    config: dict[str, Any] | None = None
    # Where the cells run (harness.executors): local, ray or ray=ADDRESS; and the Ray
    # resources (NAME[=AMOUNT]) every cell's task asks for besides its threads and device.
    executor: str = field_of(executor_flag("the cells"), default=DEFAULT_EXECUTOR)
    ray_resources: list[str] = field_of(RAY_RESOURCES, factory=list)

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
        if not self.batch_sizes:
            raise UserError("--batch-sizes: give at least one batch size")
        for b in self.batch_sizes:
            if b < 1:
                raise UserError(f"--batch-sizes must be positive integers, got {b}")
        for t in self.thread_counts():
            if t < 1:
                raise UserError(f"--threads must be at least 1, got {t}")
        for name, value, low in (
            ("--inter-op-threads", self.inter_op(), 1),
            ("--repeats", self.repeats, 1),
            ("--device-id", self.device_id, 0),
        ):
            if value < low:
                raise UserError(f"{name} must be at least {low}, got {value}")
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
