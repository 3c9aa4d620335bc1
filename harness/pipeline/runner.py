"""``dlbench run``: the whole chain for one model, resumable, one run id.

train (each framework) -> export to ONNX, verified (each framework) -> builds
from the first framework's ONNX (INT8 and FP16 ONNX; TensorRT engines where a
GPU has TensorRT) -> benchmark every backend on those files and on the native
checkpoints.  Every stage calls the same API its CLI command wraps, so a run is
exactly what the step-by-step scripts in ``scripts/`` do.

All records of a run, resumptions included, carry one run id (the stages see
it through ``$DLBENCH_RUN_ID``), so ``dlbench report --run ID`` shows the run.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from dlbench.harness.bench.measure import StopRule
from dlbench.harness.context import RUN_ID_ENV, command_line, new_run_id, now_iso
from dlbench.models.errors import UserError
from dlbench.harness.pipeline.stages import (BenchStage, BuildStage, Context, ExportStage, Stage,
                                     TrainStage)
from dlbench.harness.pipeline.workdir import Workdir

BUILD_PRECISIONS = ("fp32", "fp16", "int8")
# A CPU run must finish in minutes (make demo: under 15 on 2 cores); a run on a
# GPU can afford the model's own batch and more steps, given on the command line.
DEMO_RULE = StopRule(warmup=2, max_warmup=10, min_iterations=5, min_duration_s=2.0)


@dataclass
class RunRequest:
    model: str
    frameworks: list[str] | None = None
    backends: list[str] = field(default_factory=lambda: ["all"])
    precisions: list[str] = field(default_factory=lambda: list(BUILD_PRECISIONS))
    batch_sizes: list[int] = field(default_factory=lambda: [1, 8, 32])
    train_steps: int = 6
    warmup_steps: int = 2
    train_batch_size: int | None = None
    device: str = "cpu"
    threads: int | None = None
    seed: int = 0
    rule: StopRule = field(default_factory=lambda: DEMO_RULE)
    workdir: str | None = None
    resume: bool = False
    db: str | None = None
    timeout: float | None = None
    show_progress: bool = True
    argv: list[str] | None = None

    @property
    def bench_devices(self) -> list[str]:
        return [{"cpu": "cpu", "gpu": "cuda", "ascend": "ascend"}[self.device]]

    def options(self) -> dict[str, Any]:
        """What a resumed run must agree on with the run it continues."""
        return {"model": self.model, "device": self.device, "seed": self.seed,
                "train_steps": self.train_steps, "warmup_steps": self.warmup_steps,
                "train_batch_size": self.train_batch_size}


def validate(req: RunRequest) -> None:
    """Bad input fails here, before any stage runs (exit 2)."""
    from dlbench.harness.backends import get_backend
    from dlbench.harness.frameworks import FRAMEWORKS, get_framework, is_installed
    from dlbench.harness.training.runner import TrainRequest, validate as validate_train
    from dlbench.models.registry import get_model

    spec = get_model(req.model)
    req.frameworks = req.frameworks or list(spec.frameworks)
    for name in req.frameworks:
        get_framework(name)
        if name not in spec.builders:
            raise UserError(f"model {spec.name!r} has no {name} implementation; it has: "
                            f"{', '.join(spec.builders)}")
    for name in req.backends:
        if name != "all":
            get_backend(name)
    for p in req.precisions:
        if p not in BUILD_PRECISIONS:
            raise UserError(f"--precisions {p}: choose from {', '.join(BUILD_PRECISIONS)}")
    if not req.batch_sizes or min(req.batch_sizes) < 1:
        raise UserError("--batch-sizes must be positive integers")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    req.rule.validate()
    # The training checks (steps, batch, device, threads) with the frameworks that
    # are installed; a missing one is a stage reported as unavailable, not bad input.
    present = [f for f in req.frameworks if is_installed(FRAMEWORKS[f].module)]
    if present:
        validate_train(TrainRequest(model=spec.name, frameworks=present,
                                    batch_size=req.train_batch_size, steps=req.train_steps,
                                    warmup_steps=req.warmup_steps, device=req.device,
                                    threads=req.threads, db=req.db))


def plan(req: RunRequest) -> list[Stage]:
    stages: list[Stage] = [TrainStage(fw) for fw in req.frameworks]
    stages += [ExportStage(fw) for fw in req.frameworks]
    stages += [BuildStage(p) for p in ("int8", "fp16") if p in req.precisions]
    if "all" in req.backends or "tensorrt" in req.backends:
        stages += [BuildStage("tensorrt", p) for p in req.precisions]
    stages.append(BenchStage())
    return stages


def _open_workdir(req: RunRequest) -> tuple[Workdir, str, bool]:
    """The work directory and the run id: a new run, or the one ``--resume`` continues."""
    from dlbench.harness.fingerprint import fingerprint

    wd = Workdir(req.workdir or os.path.join("runs", req.model))
    previous = wd.read_run()
    machine = fingerprint()["machine_id"]
    if previous is None:
        if wd.root.exists() and any(wd.root.iterdir()):
            raise UserError(f"--workdir {wd.root}: exists and is not a dlbench run directory; "
                            f"choose an empty or new one")
        from dlbench.models.atomic import check_can_create

        check_can_create(wd.run_file)
        run_id = new_run_id()
        wd.start({"run_id": run_id, "started_at": now_iso(), "machine_id": machine,
                  "options": req.options(), "command_line": command_line(req.argv)})
        return wd, run_id, False
    if not req.resume:
        raise UserError(f"--workdir {wd.root} holds run {previous.get('run_id')}: pass --resume "
                        f"to continue it, or choose another --workdir")
    if previous.get("machine_id") != machine:
        raise UserError(f"--workdir {wd.root}: run {previous.get('run_id')} was measured on "
                        f"machine {previous.get('machine_id')}, this is {machine}; a run "
                        f"cannot mix machines")
    changed = {k: (v, req.options().get(k)) for k, v in previous.get("options", {}).items()
               if req.options().get(k) != v}
    if changed:
        k, (was, now) = next(iter(changed.items()))
        raise UserError(f"--resume: run {previous['run_id']} was started with {k}={was}, not "
                        f"{now}; use another --workdir for a different run")
    return wd, previous["run_id"], True


def _finished(stage: Stage, wd: Workdir, stored: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stage's result if an earlier attempt of this run finished it.

    The bench stage always runs again: it resumes cell by cell by itself.
    """
    if stage.kind == "bench":
        return None
    done = wd.stage(stage.name)
    own = [r for r in stored if stage.matches(r)]
    if done is None and own:                # stored, but killed before the manifest
        done = wd.finish(stage.name, dict(stage.from_records(own), seconds=None))
    return done


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


def run_pipeline(req: RunRequest, progress: Callable[[str], None] | None = None
                 ) -> tuple[Workdir, str, dict[str, dict[str, Any]]]:
    """Run (or resume) every stage; return the work directory, the run id and each
    stage's result."""
    validate(req)
    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    from dlbench.harness.results import ResultStore

    store = ResultStore(req.db)
    store.check_writable()
    wd, run_id, resumed = _open_workdir(req)
    stages = plan(req)
    ctx = Context(req, wd, run_id, progress=say)
    say(f"dlbench run {req.model}: run {run_id}, work directory {wd.root}"
        + (" (resumed)" if resumed else ""))
    stored = store.records("run_id = ?", [run_id]) if resumed else []
    start = time.monotonic()
    saved_env = os.environ.get(RUN_ID_ENV)
    os.environ[RUN_ID_ENV] = run_id
    try:
        for i, stage in enumerate(stages, 1):
            head = f"==> [{i}/{len(stages)}] {stage.name}"
            done = _finished(stage, wd, stored) if resumed else None
            if done is not None:
                ctx.results[stage.name] = done
                say(f"{head}: {done['status']} (finished earlier, not redone)")
                continue
            say(f"{head} (elapsed {_clock(time.monotonic() - start)})")
            t0 = time.monotonic()
            result = stage.run(ctx)
            result["seconds"] = round(time.monotonic() - t0, 2)
            ctx.results[stage.name] = wd.finish(stage.name, result)
            tail = f": {result['reason']}" if result.get("reason") else ""
            say(f"    {stage.name} {result['status']} in {_clock(result['seconds'])}{tail}")
    finally:
        if saved_env is None:
            os.environ.pop(RUN_ID_ENV, None)
        else:
            os.environ[RUN_ID_ENV] = saved_env
    say(f"dlbench run {req.model}: finished in {_clock(time.monotonic() - start)}")
    return wd, run_id, ctx.results
