"""The work directory of a ``dlbench run``: every stage's artifact and manifest.

Layout::

    WORKDIR/run.json                      run id, model, machine, the options it started with
    WORKDIR/stages/<stage>.json           one per finished stage: status, reason, time,
                                          artifacts, record ids
    WORKDIR/train/<model>/<framework>/    checkpoint + manifest.json  (dlbench train)
        model.onnx, model.int8.onnx, ...  beside it                   (dlbench export, build)

A stage is finished when its manifest is here.  The manifest is written right
after the stage's record reaches the database; a process killed between the
two writes leaves a stored record and no manifest, so a resumed run also asks
the database (see ``harness.pipeline.stages``) before redoing a stage: the
database must never hold one stage twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlbench.core.atomic import write_json
from dlbench.core.errors import UserError
from dlbench.harness.store.context import now_iso

RUN_FILE = "run.json"


class Workdir:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    @property
    def run_file(self) -> Path:
        return self.root / RUN_FILE

    @property
    def train_dir(self) -> Path:
        return self.root / "train"

    def checkpoint_dir(self, model: str, framework: str) -> Path:
        """Where ``dlbench train --out TRAIN_DIR`` puts a checkpoint (and export its ONNX)."""
        return self.train_dir / model / framework

    def stage_file(self, stage: str) -> Path:
        return self.root / "stages" / f"{stage.replace(':', '-')}.json"

    def read_run(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.run_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise UserError(
                f"{self.run_file}: unreadable ({exc}); remove the work directory to start afresh"
            ) from None

    def start(self, run: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.run_file, run)

    def stage(self, stage: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.stage_file(stage).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent or torn: the stage is not finished

    def finish(self, stage: str, result: dict[str, Any]) -> dict[str, Any]:
        result = dict(result, stage=stage, finished_at=now_iso())
        self.stage_file(stage).parent.mkdir(parents=True, exist_ok=True)
        write_json(self.stage_file(stage), result)
        return result
