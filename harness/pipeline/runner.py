"""``dlbench run``: the whole chain for one model, resumable, one run id.

train (each framework) -> export to ONNX, verified (each framework) -> builds
from the first framework's ONNX (INT8 and FP16 ONNX; TensorRT engines where a
GPU has TensorRT) -> benchmark every backend on those files and on the native
checkpoints.  Every stage calls the same API its CLI command wraps, so a run is
exactly what the step-by-step scripts in ``scripts/`` do: the stages are
planned first (``harness.pipeline.plan``), then executed or, with
``--print-steps``, printed as those commands.  A request field left None is the
model's own default (``ModelSpec.run``).

All records of a run, resumptions included, carry one run id (the stages see
it through ``$DLBENCH_RUN_ID``), so ``dlbench report --run ID`` shows the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dlbench.core.atomic import sole_writer
from dlbench.core.devices import inference_name
from dlbench.core.errors import UserError
from dlbench.core.flags import comma_list, field_of, flag, nested
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.cells.allocator import check as check_allocator
from dlbench.harness.executors import DEFAULT_EXECUTOR, RAY_RESOURCES, executor_flag, open_executor
from dlbench.harness.executors import check as check_executor
from dlbench.harness.pipeline.plan import Plan, build_plan
from dlbench.harness.pipeline.resume import LOCK, finished, open_workdir
from dlbench.harness.pipeline.stages import Context, TrainStage
from dlbench.harness.pipeline.workdir import Workdir
from dlbench.harness.store.context import DB, OUTPUT, RUN_ID_ENV
from dlbench.harness.training.request import EAGER

BUILD_PRECISIONS = ("fp32", "fp16", "int8")
# A CPU run must finish in minutes (make demo: under 15 on 2 cores); a run on a
# GPU can afford the model's own batch and more steps, given on the command line.
DEMO_RULE = StopRule(warmup=2, max_warmup=10, min_iterations=5, min_duration_s=2.0)


@dataclass
class RunRequest:
    """Each field a flag sets declares it (``core.flags``); the model and a user's own
    model are read by ``commands.run`` (a family's --size, a file or --model-from)."""

    model: str
    # None: the model's own (ModelSpec.run, ModelSpec.default_batch_size); see resolve().
    frameworks: list[str] | None = flag(
        "--frameworks",
        default=None,
        type=comma_list(str),
        help="comma-separated (default: every framework the model has)",
    )
    backends: list[str] = flag(
        "--backends",
        factory=lambda: ["all"],
        type=comma_list(str),
        help="comma-separated inference backends (default '{default}': every available one)",
    )
    precisions: list[str] | None = flag(
        "--precisions",
        default=None,
        type=comma_list(str),
        help="builds to make and measure besides fp32: fp16, int8 (default: the model's own)",
    )
    batch_sizes: list[int] | None = flag(
        "--batch-sizes",
        default=None,
        type=comma_list(int),
        help="inference batch sizes (default: the model's own)",
    )
    train_steps: int | None = flag(
        "--train-steps", default=None, type=int, help="measured training steps (default: the model's own)"
    )
    warmup_steps: int | None = flag(
        "--warmup-steps", default=None, type=int, help="training warm-up steps (default: the model's own)"
    )
    train_batch_size: int | None = flag(
        "--train-batch-size", default=None, type=int, help="training batch (default: the model's own)"
    )
    eager: bool = field_of(EAGER, default=False)
    train_data: str | None = None
    eval: bool | None = None
    learning_rate: float | None = None
    int8_mode: str | None = None
    int8_op_types: tuple[str, ...] | None = None
    calib_data: str | None = None
    device: str = flag("--device", default="cpu", help="cpu, gpu or ascend (default {default})")
    threads: int | None = flag(
        "--threads", default=None, type=int, help="intra-op threads (default: physical cores)"
    )
    # The benchmark cells' (training sets its own pools: harness.training).
    inter_op_threads: int | None = flag(
        "--inter-op-threads",
        default=None,
        type=int,
        help="inter-op threads of the benchmark cells (default 1)",
    )
    # The backends' declared options (commands.bench.add_backend_options), given to the
    # bench stage's cells: what tune's best point sets, among them.
    backend_options: dict[str, Any] = field(default_factory=dict)
    # The allocator of the timed stages' processes (train, bench); conversions and
    # verifications are not timed and run with the default (harness.cells.allocator).
    allocator: str = flag(
        "--allocator",
        default=DEFAULT_ALLOCATOR,
        metavar="NAME",
        help="memory allocator of the training and benchmark processes: system, tuned (glibc "
        "keeping freed memory), jemalloc or tcmalloc (default {default})",
    )
    seed: int = flag("--seed", default=0, type=int, help="default {default}")
    rule: StopRule = nested(StopRule, factory=lambda: replace(DEMO_RULE))  # per inference cell
    workdir: str | None = flag(
        "--workdir",
        default=None,
        group=OUTPUT,
        help="where every stage's artifact and manifest goes (default runs/MODEL)",
    )
    resume: bool = flag(
        "--resume",
        default=False,
        switch=True,
        group=OUTPUT,
        help="continue the run in --workdir without redoing finished stages",
    )
    retry: bool = flag(
        "--retry",
        default=True,
        negatable=True,
        group=OUTPUT,
        help="with --resume, run the stages that failed again (their failure stays stored); "
        "--no-retry keeps the failure (default {default})",
    )
    db: str | None = field_of(DB, default=None)
    timeout: float | None = flag(
        "--timeout",
        default=None,
        type=float,
        group=OUTPUT,
        help="seconds per training run, conversion or benchmark cell",
    )
    show_progress: bool = True
    argv: list[str] | None = None
    config: dict[str, Any] | None = None  # the resolved CLI configuration, kept with the run
    # Where the benchmark cells run (harness.executors); how a cell runs, not what it
    # measures, so a resumed run may change it.
    executor: str = field_of(executor_flag("the benchmark cells"), default=DEFAULT_EXECUTOR)
    ray_resources: list[str] = field_of(RAY_RESOURCES, factory=list)
    # A user's own model (harness.pipeline.user.UserModel) instead of a zoo name: no
    # training; ``model`` becomes its name once probed.
    user: Any = None

    @property
    def bench_devices(self) -> list[str]:
        return [inference_name(self.device)]

    def options(self) -> dict[str, Any]:
        """What a resumed run must agree on with the run it continues."""
        return {
            "model": self.model,
            "device": self.device,
            "seed": self.seed,
            "train_steps": self.train_steps,
            "warmup_steps": self.warmup_steps,
            "train_batch_size": self.train_batch_size,
            "train_data": self.train_data,
            "learning_rate": self.learning_rate,
            "allocator": self.allocator,
            **({"eager": True} if self.eager else {}),  # a run without it keeps its keys
            **({"user": self.user.options()} if self.user else {}),
        }


def resolve(req: RunRequest) -> RunRequest:
    """Fill every field left None with the model's own default, in place: from
    here on the request says exactly what runs (and what the plan prints)."""
    if req.user is not None:
        return _resolve_user(req)
    from dlbench.models.registry import get_model

    spec = get_model(req.model)
    d = spec.run
    req.frameworks = req.frameworks or list(spec.run_frameworks)
    req.precisions = req.precisions if req.precisions is not None else list(d.precisions)
    req.batch_sizes = req.batch_sizes if req.batch_sizes is not None else list(d.batch_sizes)
    for name, default in (
        ("train_steps", d.train_steps),
        ("warmup_steps", d.warmup_steps),
        ("train_batch_size", spec.default_batch_size),
        ("train_data", d.train_data),
        ("eval", d.eval),
        ("learning_rate", d.learning_rate),
        ("int8_mode", d.int8_mode),
        ("int8_op_types", d.int8_op_types),
        ("calib_data", d.calib_data),
    ):
        if getattr(req, name) is None:
            setattr(req, name, default)
    return req


def _resolve_user(req: RunRequest) -> RunRequest:
    """A user's model: its framework and name from one probe; the run's defaults for the
    rest (``RunDefaults``: what a zoo model has unless its spec says otherwise)."""
    from dlbench.harness.formats import ONNX
    from dlbench.harness.pipeline.user import ONNX_SOURCE, probe
    from dlbench.models.registry import RunDefaults

    if req.user.framework is None:
        art = probe(req.user, req.timeout)
        req.user.framework = ONNX_SOURCE if art.format == ONNX else art.ref.framework
        req.model = art.ref.model
    if req.user.onnx:  # nothing to export: the builds and the bench start from the file
        if req.frameworks:
            raise UserError(f"--frameworks {','.join(req.frameworks)}: {req.model} is an ONNX file")
        req.frameworks = []
    elif req.frameworks not in (None, [req.user.framework]):
        raise UserError(
            f"--frameworks {','.join(req.frameworks)}: {req.model} is a {req.user.framework} model"
        )
    else:
        req.frameworks = [req.user.framework]
    d = RunDefaults()
    req.precisions = req.precisions if req.precisions is not None else list(d.precisions)
    req.batch_sizes = req.batch_sizes if req.batch_sizes is not None else list(d.batch_sizes)
    req.int8_mode = req.int8_mode or d.int8_mode
    req.eval = False
    return req


def validate(req: RunRequest) -> None:
    """Bad input fails here, before any stage runs (exit 2)."""
    from dlbench.core.frameworks import FRAMEWORKS, get_framework
    from dlbench.harness.backends import check_options, get_backend
    from dlbench.harness.machine.frameworks import is_installed
    from dlbench.harness.training.checks import validate as validate_train
    from dlbench.models.registry import get_model

    if req.user is not None:
        if req.train_steps is not None or req.train_batch_size is not None:
            raise UserError(
                "--train-steps/--train-batch-size: 'dlbench run' does not train a "
                "user's own model yet (it exports, builds and benchmarks it)"
            )
        resolve(req)
    else:
        spec = get_model(req.model)
        resolve(req)
        for name in req.frameworks:
            get_framework(name)
            if name not in spec.builders:
                raise UserError(
                    f"model {spec.name!r} has no {name} implementation; it has: {', '.join(spec.builders)}"
                )
    for name in req.backends:
        if name != "all":
            get_backend(name)
    check_options(req.backend_options, [n for n in req.backends if n != "all"])
    for p in req.precisions:
        if p not in BUILD_PRECISIONS:
            raise UserError(f"--precisions {p}: choose from {', '.join(BUILD_PRECISIONS)}")
    if req.int8_mode not in ("auto", "static", "dynamic"):
        raise UserError(f"int8 mode {req.int8_mode!r}: choose auto, static or dynamic")
    if not req.batch_sizes or min(req.batch_sizes) < 1:
        raise UserError("--batch-sizes must be positive integers")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    check_allocator(req.allocator)
    check_executor(req.executor, req.ray_resources)
    req.rule.validate()
    # The training checks (steps, batch, device, threads) with the frameworks that
    # are installed; a missing one is a stage reported as unavailable, not bad input.
    present = [f for f in req.frameworks if is_installed(FRAMEWORKS[f].module)]
    if present and req.user is None:
        # The train stages' own request (so its checks look where the run writes), for
        # every installed framework at once.
        train = TrainStage(present[0]).request(req, str(workdir_of(req).train_dir))
        validate_train(replace(train, frameworks=present))


def workdir_of(req: RunRequest) -> Workdir:
    return Workdir(req.workdir or os.path.join("runs", req.model))


def plan(req: RunRequest) -> Plan:
    """The validated request's stages, before anything runs (what --print-steps prints)."""
    validate(req)
    return build_plan(req, workdir_of(req))


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


def run_pipeline(
    req: RunRequest, progress: Callable[[str], None] | None = None
) -> tuple[Workdir, str, dict[str, dict[str, Any]]]:
    """Run (or resume) every stage; return the work directory, the run id and each
    stage's result."""
    stages = plan(req).stages
    from dlbench.harness.output.progress import Progress

    bar = Progress(enabled=req.show_progress)  # one display: every stage's units, one ETA
    for stage in stages:
        bar.expect(1, stage.kind)  # the bench's cells replace its 1 when known
    say = progress or bar.note
    from dlbench.harness.store.results import ResultStore

    store = ResultStore(req.db)
    store.check_writable()
    open_executor(req.executor, req.ray_resources)  # no cluster there: exit 2 at once
    wd = workdir_of(req)
    with sole_writer(wd.root / LOCK, f"--workdir {wd.root}"):  # one writer per run
        return _run_locked(req, wd, stages, bar, say, store)


def _run_locked(
    req: RunRequest, wd: Workdir, stages, bar, say, store
) -> tuple[Workdir, str, dict[str, dict[str, Any]]]:
    run_id, resumed = open_workdir(req, wd)
    ctx = Context(req, wd, run_id, progress=say)
    say(
        f"dlbench run {req.model}: run {run_id}, work directory {wd.root}" + (" (resumed)" if resumed else "")
    )
    stored = store.records("run_id = ?", [run_id]) if resumed else []
    start = time.monotonic()
    saved_env = os.environ.get(RUN_ID_ENV)
    os.environ[RUN_ID_ENV] = run_id
    try:
        bar.activate()
        for i, stage in enumerate(stages, 1):
            head = f"==> [{i}/{len(stages)}] {stage.name}"
            done = finished(stage, wd, stored, req.retry) if resumed else None
            if done is not None:
                ctx.results[stage.name] = done
                say(f"{head}: {done['status']} (finished earlier, not redone)")
                bar.skip(stage.kind)
                continue
            if stage.kind != "bench":  # the bench reports cell by cell
                bar.start(stage.name, stage.kind)
            t0 = time.monotonic()
            result = stage.run(ctx)
            result["seconds"] = round(time.monotonic() - t0, 2)
            ctx.results[stage.name] = wd.finish(stage.name, result)
            tail = f": {result['reason']}" if result.get("reason") else ""
            summary = f"{result['status']} in {_clock(result['seconds'])}{tail}"
            if stage.kind != "bench":
                bar.finish(summary)
            else:
                say(f"    {stage.name} {summary}")
    finally:
        bar.deactivate()
        if saved_env is None:
            os.environ.pop(RUN_ID_ENV, None)
        else:
            os.environ[RUN_ID_ENV] = saved_env
    say(f"dlbench run {req.model}: finished in {_clock(time.monotonic() - start)}")
    return wd, run_id, ctx.results
