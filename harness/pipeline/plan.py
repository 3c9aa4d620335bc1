"""The plan of a ``dlbench run``: its stages, decided once, before anything runs.

One plan is either executed (``runner.run_pipeline``) or printed as the
``dlbench`` commands that do the same (``dlbench run MODEL --print-steps``),
and ``--print-steps script`` writes it as the readable shell script in
``scripts/``, whose knobs default to the same values.  So the run, its printed
steps and the scripts come from one place and a test can hold them equal.

What this machine cannot run (a framework not installed, TensorRT without a
GPU) stays in the plan with its reason as the stage's ``condition``; printed,
it is a comment, and the stages that need it drop out as they would at run time.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from dlbench.harness.pipeline.bench_stage import BenchStage
from dlbench.harness.pipeline.stages import BuildStage, ExportStage, Stage, TrainStage
from dlbench.harness.pipeline.workdir import Workdir


@dataclass
class Plan:
    req: object  # a resolved runner.RunRequest
    workdir: Workdir
    stages: list[Stage]

    @property
    def primary(self) -> str | None:
        """The framework whose fp32 ONNX the builds start from: the first that can train
        (a user's model, which is not trained: its own framework, if it can export)."""
        starts = [s for s in self.stages if isinstance(s, TrainStage)] or [
            s for s in self.stages if isinstance(s, ExportStage)
        ]
        return next((s.framework for s in starts if s.condition is None), None)

    @property
    def primary_onnx(self) -> str | None:
        """The fp32 ONNX file the builds start from: the user's own ONNX file, or the
        primary framework's export."""
        user = getattr(self.req, "user", None)
        if user is not None and user.onnx:
            return user.path
        fw = self.primary
        return next(
            (
                s.output(self.req, self.workdir)
                for s in self.stages
                if isinstance(s, ExportStage) and s.framework == fw
            ),
            None,
        )

    def bench_artifacts(self) -> list[str]:
        """What the bench stage measures if every stage that can run succeeds:
        the primary fp32 ONNX, its builds, the native checkpoints (the order of
        ``BenchStage.artifacts`` at run time)."""
        paths = [self.primary_onnx] if self.primary_onnx else []
        paths += [
            s.output(self.req, self.workdir, self.primary_onnx)
            for s in self.stages
            if isinstance(s, BuildStage) and s.condition is None and self.primary_onnx
        ]
        paths += [
            s.output(self.req, self.workdir)
            for s in self.stages
            if isinstance(s, TrainStage) and s.condition is None
        ]
        if self.req.user is not None and self.req.user.path:
            paths.append(self.req.user.path)  # the model itself, on its framework
        return list(dict.fromkeys(paths))  # a user's ONNX file is the primary one too

    def steps(self) -> list[tuple[Stage | None, list[str]]]:
        """Each stage with its command, then the report ``dlbench run`` prints."""
        out: list[tuple[Stage | None, list[str]]] = [
            (s, s.argv(self.req, self.workdir, self)) for s in self.stages
        ]
        report = ["dlbench", "report", "--run", "$DLBENCH_RUN_ID", "--format", "md"]
        return out + [(None, report + (["--db", self.req.db] if self.req.db else []))]


def build_plan(req, wd: Workdir) -> Plan:
    """The stages in order, each marked with why it cannot run here (if so)."""
    from dlbench.core.frameworks import FRAMEWORKS
    from dlbench.harness.machine.frameworks import is_installed

    if req.user is not None:
        from dlbench.harness.pipeline.user import UserExportStage

        stages: list[Stage] = [UserExportStage(fw, req.user) for fw in req.frameworks]
    else:
        stages = [TrainStage(fw) for fw in req.frameworks]
        stages += [ExportStage(fw) for fw in req.frameworks]
    stages += _build_stages(req)
    stages.append(BenchStage())
    for s in stages:
        if isinstance(s, (TrainStage, ExportStage)) and not is_installed(FRAMEWORKS[s.framework].module):
            s.condition = f"{s.framework} is not installed here"
    plan = Plan(req, wd, stages)
    for s in stages:
        if isinstance(s, BuildStage):
            if plan.primary_onnx is None:
                s.condition = "no framework to train and export here"
            else:
                s.condition = s.missing()
    return plan


def _build_stages(req) -> list[Stage]:
    """The builds the run's precisions ask for, from the targets' declarations: a target
    that makes one precision (INT8 and FP16 ONNX) when that precision is asked; one that
    makes several for its own backend (TensorRT) once per asked precision, when that backend
    is among the run's."""
    from dlbench.converters.base import BUILD_TARGETS, build_hop

    hops = {t: build_hop(t) for t in BUILD_TARGETS.names()}
    fixed = [BuildStage(t) for t, h in hops.items() if not h.precisions and any(map(h.makes, req.precisions))]
    engines = [
        BuildStage(t, p)
        for t, h in hops.items()
        for p in req.precisions
        if h.precisions and h.makes(p) and ("all" in req.backends or h.requires_backend in req.backends)
    ]
    return fixed + engines


def shell_line(argv: list[str]) -> str:
    """One command as a shell reads it; ``$DLBENCH_RUN_ID`` stays a variable.  A database
    URL's password is masked: printed steps end up in logs and scripts (libpq reads it from
    ``~/.pgpass`` or ``$PGPASSWORD`` instead)."""
    from dlbench.harness.store.url import mask

    return mask(" ".join('"$DLBENCH_RUN_ID"' if a == "$DLBENCH_RUN_ID" else shlex.quote(a) for a in argv))


def print_steps(plan: Plan) -> str:
    """The plan as shell commands, one a line; a stage this machine cannot run is
    a comment saying why."""
    lines = [
        f"# dlbench run {plan.req.model}: the same steps, one dlbench command each",
        "export DLBENCH_RUN_ID=${DLBENCH_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-sh$$}",
    ]
    for stage, argv in plan.steps():
        line = shell_line(argv)
        lines.append(
            line if stage is None or stage.condition is None else f"# skipped, {stage.condition}: {line}"
        )
    return "\n".join(lines) + "\n"
