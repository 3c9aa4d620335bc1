"""``dlbench run`` on a user's own model: nothing to train, so export -> builds -> bench.

The model (a file in its framework's own format, or ``--model-from`` code)
is probed once to learn its framework and name; the export stage writes
``WORKDIR/<name>.onnx`` verified against the framework, the builds start
from it, and the bench measures the ONNX files and the model itself on its
framework.  An ONNX file has nothing to export: the builds start from it (and
are written into the workdir, not beside it), and the bench measures it and them.
Inputs the model does not size (``--shape``, ``--input``) go to every stage that
makes inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.flags import to_argv
from dlbench.harness.pipeline.stages import ExportStage

# What a user's ONNX file is in place of a framework: the builds start from it.
ONNX_SOURCE = "onnx"


@dataclass
class UserModel:
    """What ``dlbench run`` was given instead of a zoo name."""

    path: str | None = None
    model_from: str | None = None
    weights: str | None = None
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    framework: str | None = None  # known once probed; "onnx" for an ONNX file

    @property
    def onnx(self) -> bool:
        """An ONNX file: nothing to export, the chain starts at the builds."""
        return self.framework == ONNX_SOURCE

    def hints(self, timeout: float | None) -> dict[str, Any]:
        return {"shapes": self.shapes, "inputs": self.inputs, "timeout": timeout}

    def options(self) -> dict[str, Any]:
        """What a resumed run must agree on."""
        return {
            "path": self.path,
            "model_from": self.model_from,
            "weights": self.weights,
            "shapes": {k: list(v) for k, v in self.shapes.items()},
            "inputs": {k: str(v) for k, v in self.inputs.items()},
        }


def probe(user: UserModel, timeout: float | None = None):
    """The model as bench sees it (its framework, name, signature): one probe cell."""
    from dlbench.harness.bench.artifacts import resolve, resolve_code

    if user.path:
        from dlbench.harness.formats import ONNX

        art = resolve(user.path, weights=user.weights, **user.hints(timeout))  # a model by name takes them
        if not art.user and art.format != ONNX:
            from dlbench.core.errors import UserError

            raise UserError(
                f"{user.path}: already {art.format}; 'dlbench run' takes a zoo name, an ONNX "
                f"file or a framework's own model ('dlbench bench' measures a {art.format} file)"
            )
        return art
    return resolve_code(user.model_from, user.weights, **user.hints(timeout))


class UserExportStage(ExportStage):
    """The user's model to ONNX, verified; no training stage before it."""

    def __init__(self, framework: str, user: UserModel):
        super().__init__(framework)
        self.user = user

    def output(self, req, wd):
        return str(wd.root / f"{req.model}.onnx")

    def request(self, req, wd):
        """The one export request of the stage: what it runs and what it prints."""
        from dlbench.harness.convert.request import ExportRequest

        u = self.user
        return ExportRequest(
            sources=[u.path] if u.path else [],
            model_from=u.model_from,
            weights=u.weights,
            shapes=u.shapes,
            inputs=u.inputs,
            out=self.output(req, wd),
            threads=req.threads,
            db=req.db,
            timeout=req.timeout,
            argv=req.argv,
        )

    def argv(self, req, wd, plan):
        return ["dlbench", "export", *to_argv(self.request(req, wd))]

    def run(self, ctx):
        from dlbench.core.errors import UserError, first_line
        from dlbench.harness.convert.export import export
        from dlbench.harness.pipeline.stages import failed

        try:
            records = export(self.request(ctx.req, ctx.workdir), progress=ctx.progress)
        except UserError as exc:  # the exporter refused it: the bench goes on
            return failed(first_line(exc))
        return self.from_records(records)


def native_artifact(user: UserModel) -> list[str]:
    """The model itself as a bench artifact (code goes as --model-from instead)."""
    return [str(Path(user.path))] if user.path else []
