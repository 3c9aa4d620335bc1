"""The stages of ``dlbench run``, one class per kind, each a thin call into the API
the matching CLI command wraps (train, export, build, bench).

A stage turns what it stored into a *result*: ``status`` (``ok``; ``unverified``
when a converted file exists but does not compute what its source computes;
``failed`` when it ran and failed; ``unavailable`` when this machine cannot run
it at all: a framework not installed, no GPU for TensorRT), ``reason``,
``artifacts`` and ``records`` (database ids).  Stages never raise for a
failure of their own: the run reports it and goes on with the stages that do
not need it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError, first_line
from dlbench.core.flags import to_argv

OK_STATUSES = ("ok", "unverified")


@dataclass
class Context:
    """What every stage needs: the request, the work directory, the run so far."""

    req: Any  # harness.pipeline.runner.RunRequest
    workdir: Any  # harness.pipeline.workdir.Workdir
    run_id: str
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    progress: Callable[[str], None] = print

    def ok(self, stage: str) -> bool:
        return self.results.get(stage, {}).get("status") in OK_STATUSES

    def artifact(self, stage: str, key: str) -> str | None:
        return self.results.get(stage, {}).get("artifacts", {}).get(key)


def stage_result(
    status: str, reason: str | None = None, artifacts: dict | None = None, records: list | None = None
) -> dict[str, Any]:
    return {
        "status": status,
        "reason": reason,
        "artifacts": artifacts or {},
        "records": [r["id"] for r in records or [] if r.get("id") is not None],
    }


def unavailable(reason: str) -> dict[str, Any]:
    return stage_result("unavailable", reason)


def failed(reason: str) -> dict[str, Any]:
    return stage_result("failed", reason)


def _needs(ctx: Context, stage: str) -> dict[str, Any] | None:
    """A failed result when ``stage`` (an input of this one) did not produce its artifact."""
    if ctx.ok(stage):
        return None
    prev = ctx.results.get(stage, {})
    status = "unavailable" if prev.get("status") == "unavailable" else "failed"
    return stage_result(
        status,
        f"needs {stage}, which is {prev.get('status', 'not run')}"
        + (f" ({prev['reason']})" if prev.get("reason") else ""),
    )


def _convert_result(record: dict[str, Any]) -> dict[str, Any]:
    path = (record.get("context", {}).get("artifact") or {}).get("path")
    status = record["status"] if record["status"] in ("ok", "unverified") else "failed"
    return stage_result(status, record.get("error"), {"path": path} if status != "failed" else {}, [record])


class Stage:
    """One step of the plan.  ``argv`` is the ``dlbench`` command that does what
    ``run`` does (what ``--print-steps`` and the scripts show); ``condition`` is
    why this machine cannot run it (None: it can)."""

    kind = ""

    def __init__(self, name: str):
        self.name = name
        self.condition: str | None = None

    def output(self, req, wd) -> str | None:
        """The file or directory this stage will leave, as the plan foresees it."""
        return None

    def argv(self, req, wd, plan) -> list[str]:
        raise NotImplementedError

    def matches(self, record: dict[str, Any]) -> bool:
        """Whether ``record`` (of this run) is this stage's own: the stage finished."""
        return False

    def from_records(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def run(self, ctx: Context) -> dict[str, Any]:
        raise NotImplementedError


class TrainStage(Stage):
    kind = "train"

    def __init__(self, framework: str):
        super().__init__(f"train:{framework}")
        self.framework = framework

    def matches(self, record):
        return record["kind"] == "train" and record["framework"] == self.framework

    def output(self, req, wd):
        return str(wd.checkpoint_dir(req.model, self.framework))

    def request(self, req, out: str, run_id: str | None = None):
        """The one training request of the stage: what it runs and what it prints."""
        from dlbench.harness.training.request import TrainRequest

        return TrainRequest(
            model=req.model,
            frameworks=[self.framework],
            batch_size=req.train_batch_size,
            steps=req.train_steps,
            warmup_steps=req.warmup_steps,
            device=req.device,
            threads=req.threads,
            allocator=req.allocator,
            seed=req.seed,
            out=out,
            db=req.db,
            timeout=req.timeout,
            argv=req.argv,
            data=req.train_data,
            eval=req.eval,
            eager=req.eager,
            learning_rate=req.learning_rate,
            extra_context={"pipeline": {"run_id": run_id, "stage": self.name}} if run_id else {},
        )

    def argv(self, req, wd, plan):
        return ["dlbench", "train", *to_argv(self.request(req, str(wd.train_dir)))]

    def from_records(self, records):
        r = records[-1]
        if r["status"] != "ok":
            return stage_result("failed", r.get("error"), records=[r])
        checkpoint = r.get("context", {}).get("checkpoint")
        return stage_result(
            "ok", artifacts={"checkpoint_dir": str(Path(checkpoint).parent.resolve())}, records=[r]
        )

    def run(self, ctx):
        from dlbench.harness.machine.frameworks import require
        from dlbench.harness.training.runner import train

        try:
            require(self.framework)
        except UserError as exc:  # not installed: says which extra installs it
            return unavailable(str(exc))
        records = train(self.request(ctx.req, str(ctx.workdir.train_dir), ctx.run_id), progress=ctx.progress)
        return self.from_records(records)


class ExportStage(Stage):
    kind = "export"

    def __init__(self, framework: str):
        super().__init__(f"export:{framework}")
        self.framework = framework

    def matches(self, record):
        return (
            record["kind"] == "convert"
            and record["framework"] == self.framework
            and record.get("context", {}).get("hop") == f"{self.framework}->onnx"
        )

    def from_records(self, records):
        return _convert_result(records[-1])

    def output(self, req, wd):
        return str(wd.checkpoint_dir(req.model, self.framework) / "model.onnx")

    def request(self, req, checkpoint: str):
        """The one export request of the stage: what it runs and what it prints."""
        from dlbench.harness.convert.request import ExportRequest

        return ExportRequest(
            sources=[checkpoint], threads=req.threads, db=req.db, timeout=req.timeout, argv=req.argv
        )

    def argv(self, req, wd, plan):
        checkpoint = str(wd.checkpoint_dir(req.model, self.framework))
        return ["dlbench", "export", *to_argv(self.request(req, checkpoint))]

    def run(self, ctx):
        from dlbench.harness.convert.export import export

        missing = _needs(ctx, f"train:{self.framework}")
        if missing:
            return missing
        checkpoint = ctx.artifact(f"train:{self.framework}", "checkpoint_dir")
        records = export(self.request(ctx.req, checkpoint), progress=ctx.progress)
        return self.from_records(records)


class BuildStage(Stage):
    """INT8 or FP16 ONNX, or a TensorRT engine, from the primary fp32 ONNX file."""

    kind = "build"

    def __init__(self, target: str, precision: str | None = None):
        from dlbench.converters.base import build_hop

        super().__init__(f"build:{target}" + (f"-{precision}" if precision else ""))
        self.target, self.precision = target, precision
        self.hop = build_hop(target)

    def missing(self) -> str | None:
        """Why this machine cannot build the target (its backend is not available)."""
        if self.hop.requires_backend is None:
            return None
        from dlbench.harness.backends import get_backend

        avail = get_backend(self.hop.requires_backend).availability()
        return (
            None if avail.available else (f"{self.hop.requires_backend} does not run here ({avail.reason})")
        )

    def matches(self, record):
        return (
            record["kind"] == "convert"
            and record.get("context", {}).get("hop") == self.hop.name
            and (self.precision is None or record.get("precision") == self.precision)
        )

    def from_records(self, records):
        return _convert_result(records[-1])

    def output(self, req, wd, source: str | None = None):
        """Beside its source, which is in the workdir; a user's own ONNX file is not, and
        the run writes nothing next to it: its builds go into the workdir."""
        from dlbench.converters.base import BuildOptions

        out = self.hop.default_out(
            Path(source or "model.onnx"), BuildOptions(precision=self.precision or "fp32")
        )
        return str(wd.root / out.name) if self._outside(req) else str(out)

    @staticmethod
    def _outside(req) -> bool:
        return req.user is not None and req.user.onnx

    def options(self, req) -> list[str]:
        """The build options the model's spec and the run ask for, as ``dlbench build``
        flags (the scripts' INT8_ARGS): their declarations spell them."""
        from dlbench.converters.base import BuildOptions

        return to_argv(BuildOptions(**self._build_options(req)))

    def request(self, req, wd, source: str):
        """The one build request of the stage: what it runs and what it prints."""
        from dlbench.converters.base import BuildOptions
        from dlbench.harness.convert.request import BuildRequest

        return BuildRequest(
            source=source,
            to=self.target,
            out=self.output(req, wd, source) if self._outside(req) else None,
            # A user's ONNX file records no input shapes: the run's --shape/--input size it.
            shapes=req.user.shapes if self._outside(req) else {},
            inputs=req.user.inputs if self._outside(req) else {},
            precision=self.precision,
            options=BuildOptions(**self._build_options(req)),
            threads=req.threads,
            db=req.db,
            timeout=req.timeout,
            argv=req.argv,
        )

    def _build_options(self, req) -> dict[str, Any]:
        """What the run asks of a build, kept to the options this target reads and to
        values away from their defaults."""
        from dlbench.converters.base import BuildOptions

        wanted = {
            "batch_sizes": tuple(req.batch_sizes),
            "dynamic": {"dynamic": True, "static": False}.get(req.int8_mode),  # auto: the graph's
            "quantize_op_types": tuple(req.int8_op_types or ()),
            "calib_data": req.calib_data,
        }
        default = BuildOptions()
        return {k: v for k, v in wanted.items() if k in self.hop.options and v != getattr(default, k)}

    def argv(self, req, wd, plan):
        return ["dlbench", "build", *to_argv(self.request(req, wd, plan.primary_onnx or "MODEL.onnx"))]

    def run(self, ctx):
        from dlbench.harness.convert.build import build

        source = primary_export(ctx)
        if source is None:
            return stage_result("failed", "no verified fp32 ONNX export to build from")
        missing = self.missing()
        if missing:
            return unavailable(missing)
        request = self.request(ctx.req, ctx.workdir, source)
        ctx.progress(
            f"    building {self.target}{' ' + self.precision if self.precision else ''}"
            f"{' (dynamic)' if request.options.dynamic else ''} from {source}"
        )
        try:
            record = build(request)
        except UserError as exc:  # the hop refused this model: the run goes on without it
            return stage_result("failed", first_line(exc))
        return self.from_records([record])


def primary_export(ctx: Context) -> str | None:
    """The fp32 ONNX file the builds start from: the user's own ONNX file, or the first
    framework's verified export."""
    user = ctx.req.user
    if user is not None and user.onnx:
        return user.path
    for fw in ctx.req.frameworks:
        if ctx.results.get(f"export:{fw}", {}).get("status") == "ok":
            return ctx.artifact(f"export:{fw}", "path")
    return None
