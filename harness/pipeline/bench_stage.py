"""The bench stage of ``dlbench run``: every backend on the run's artifacts.

Apart from the other stages because it is the one that plans artifacts by format
and backend, and resumes cell by cell.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.core.errors import UserError, first_line
from dlbench.core.flags import to_argv
from dlbench.harness.pipeline.stages import OK_STATUSES, Context, Stage, primary_export, stage_result


class BenchStage(Stage):
    """Every backend on the primary export, its builds and the native checkpoints.

    Resumes cell by cell: cells this run already stored are not measured again.
    """

    kind = "bench"

    def __init__(self):
        super().__init__("bench")

    def argv(self, req, wd, plan):
        """The files the plan foresees (at run time: those the stages did produce)."""
        from dlbench.harness.backends import options_argv

        bench = self.request(req, plan.bench_artifacts())
        return ["dlbench", "bench", *to_argv(bench), *options_argv(bench.options)]

    @staticmethod
    def request(req, paths: list[str], run_id: str | None = None):
        """The one bench request of the run: what the stage runs and what it prints."""
        from dlbench.harness.bench.request import BenchRequest

        user = req.user
        code = bool(user is not None and user.model_from and _taken(None, req))
        shapes, ranges = model_inputs(req.model) if user is None else (user.shapes, {})
        taken = [p for p in paths if _taken(p, req)]
        # --weights fill the code's model, or a model by name (its name is among the paths).
        named = user is not None and not user.model_from and user.path in taken
        return BenchRequest(
            artifacts=taken,
            backends=req.backends,
            devices=req.bench_devices,
            batch_sizes=req.batch_sizes,
            threads=[req.threads] if req.threads else None,
            inter_op_threads=req.inter_op_threads,
            options=dict(req.backend_options),
            allocator=req.allocator,
            shapes=shapes,
            int_ranges=ranges,
            inputs=user.inputs if user else {},
            model_from=user.model_from if code else None,
            weights=user.weights if code or named else None,
            rule=req.rule,
            timeout=req.timeout,
            resume_run=run_id,
            db=req.db,
            argv=req.argv,
            config=req.config,
            executor=req.executor,
            ray_resources=req.ray_resources,
        )

    def artifacts(self, ctx: Context) -> list[str]:
        paths = []
        primary = primary_export(ctx)
        if primary:
            paths.append(primary)
        for name, result in ctx.results.items():
            if name.startswith("build:") and result["status"] in OK_STATUSES:
                paths.append(result["artifacts"]["path"])
        for fw in ctx.req.frameworks:
            if ctx.ok(f"train:{fw}"):
                paths.append(ctx.artifact(f"train:{fw}", "checkpoint_dir"))
        if ctx.req.user is not None and ctx.req.user.path:
            paths.append(ctx.req.user.path)
        return list(dict.fromkeys(paths))  # a user's ONNX file is the primary one too

    def run(self, ctx):
        from dlbench.harness.bench.execute import run_bench

        bench = self.request(ctx.req, self.artifacts(ctx), ctx.run_id)
        if not bench.artifacts and not bench.model_from:
            return stage_result("failed", "nothing to benchmark: no stage produced an artifact")
        # A backend the user named whose files no stage made (no verified export for
        # onnxruntime), or that cannot run on the run's device (the CPU build of ONNX
        # Runtime on a GPU run), is skipped and said; the others still measure what there is.
        bench.backends, skipped = _running(bench, ctx.req)
        if not bench.backends:
            return stage_result("failed", f"nothing to benchmark: {skipped}")
        # A cell its backend refuses (a build one backend cannot read) is that cell's, as
        # in 'dlbench bench': the stage measures the rest and names the refusals.
        refused: list[str] = []
        try:
            records = run_bench(bench, show_progress=ctx.req.show_progress, refusals=refused)
        except UserError as exc:
            return stage_result("failed", first_line(exc))
        failed = [r for r in records if r["status"] == "failed"]
        reasons = (
            ([f"{len(failed)} of {len(records)} cells failed"] if failed else [])
            + ([f"{len(refused)} refused ({'; '.join(refused)})"] if refused else [])
            + ([skipped] if skipped else [])
        )
        status = "ok" if records or not refused else "failed"
        result = stage_result(status, "; ".join(reasons) or None, {"cells": len(records)}, records)
        # Why a build did not pay, as 'dlbench bench' says it: kept with the stage, so the
        # run's report (and a resumed run's) carries the lines beside the tables.
        from dlbench.harness.profile.advice import advise

        try:
            advice = advise(records)
        except UserError as exc:  # the measurements stand; only their explanation is missing
            advice = [f"no advice: profiling the INT8 build failed ({first_line(exc)})"]
        if advice:
            result["advice"] = advice
        return result


def _format(path: str | None, req) -> str:
    """An artifact's format from its name: the plan names files before they exist.
    None (or the user's model file) is the user's own model."""
    from dlbench.harness import formats

    if path is None or (req.user is not None and not req.user.onnx and path == req.user.path):
        return formats.user_format(req.user.framework)
    fmt = formats.by_name(path)
    return fmt.name if fmt else formats.checkpoint_format(Path(path).name)  # .../train/MODEL/FW


def _running(bench, req) -> tuple[list[str], str | None]:
    """The named backends that take one of the stage's artifacts on the run's devices, and
    a line for the rest ('all' is bench's to narrow: it skips and says the same itself)."""
    from dlbench.harness.backends import get_backend
    from dlbench.harness.bench.plan import device_reason

    if "all" in bench.backends:
        return bench.backends, None
    formats = {_format(p, req) for p in bench.artifacts}
    if bench.model_from:
        formats.add(_format(None, req))
    no_file = [b for b in bench.backends if not formats & set(get_backend(b).formats)]
    reasons = [f"{', '.join(no_file)} skipped: no stage made a file it runs"] if no_file else []
    keep = []
    for name in (b for b in bench.backends if b not in no_file):
        here = get_backend(name).availability()
        missing = [d for d in bench.devices or [] if d not in here.devices]
        if not here.available:
            reasons.append(f"{name} skipped: {here.reason}")
        elif missing:
            reasons.append(f"{name} skipped on {missing[0]}: {device_reason(get_backend(name), missing[0])}")
        else:
            keep.append(name)
    return keep, "; ".join(reasons) or None


def _taken(path: str | None, req) -> bool:
    """Whether a chosen backend runs ``path`` (a checkpoint none runs is left out)."""
    from dlbench.harness.backends import get_backend

    if "all" in req.backends:
        return True
    return any(_format(path, req) in get_backend(b).formats for b in req.backends)


def model_inputs(model: str) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, int]]]:
    """The zoo's input shapes and id ranges for a token model's benchmark.

    Exported text models keep the sequence length dynamic, which the benchmark
    cannot guess; the zoo knows the length and the vocabulary the run trained
    with.  Image models have fixed shapes in their exports: nothing to add.
    """
    from dlbench.models.registry import get_model

    spec = get_model(model)
    if not spec.token_inputs:
        return {}, {}
    shapes = {i.name: (1, *i.shape) for i in spec.inputs}
    ranges = {i.name: tuple(i.int_range) for i in spec.inputs if i.int_range}
    return shapes, ranges
