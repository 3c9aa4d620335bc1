"""Opening a run's work directory, new or resumed, and what a resumed run need not redo.

Apart from the runner, which holds the request and the loop over stages.  ``LOCK`` sits in
the work directory while a run writes it (``core.atomic.sole_writer``): two ``dlbench run
--resume`` on one directory corrupted each other (the training record stored twice, the
second export crashing, its INT8 and FP16 stages failed for good).
"""

from __future__ import annotations

from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.pipeline.stages import Stage
from dlbench.harness.pipeline.workdir import Workdir
from dlbench.harness.store.context import command_line, new_run_id, now_iso

LOCK = ".dlbench-run.lock"


def open_workdir(req: Any, wd: Workdir) -> tuple[str, bool]:
    """The run id and whether it is resumed: a new run in ``wd``, or the one ``--resume``
    continues there."""
    from dlbench.harness.machine.fingerprint import fingerprint

    previous = wd.read_run()
    machine = fingerprint()["machine_id"]
    if previous is None:
        if wd.root.exists() and any(p.name != LOCK for p in wd.root.iterdir()):
            raise UserError(
                f"--workdir {wd.root}: exists and is not a dlbench run directory; choose an empty or new one"
            )
        from dlbench.core.atomic import check_can_create

        check_can_create(wd.run_file)
        run_id = new_run_id()
        wd.start(
            {
                "run_id": run_id,
                "started_at": now_iso(),
                "machine_id": machine,
                "options": req.options(),
                "command_line": command_line(req.argv),
                "config": req.config,
            }
        )
        return run_id, False
    if not req.resume:
        raise UserError(
            f"--workdir {wd.root} holds run {previous.get('run_id')}: pass --resume "
            f"to continue it, or choose another --workdir"
        )
    if previous.get("machine_id") != machine:
        raise UserError(
            f"--workdir {wd.root}: run {previous.get('run_id')} was measured on "
            f"machine {previous.get('machine_id')}, this is {machine}; a run "
            f"cannot mix machines"
        )
    changed = {
        k: (v, req.options().get(k))
        for k, v in previous.get("options", {}).items()
        if req.options().get(k) != v
    }
    if changed:
        k, (was, now) = next(iter(changed.items()))
        raise UserError(
            f"--resume: run {previous['run_id']} was started with {k}={was}, not "
            f"{now}; use another --workdir for a different run"
        )
    return previous["run_id"], True


def finished(stage: Stage, wd: Workdir, stored: list[dict[str, Any]], retry: bool) -> dict[str, Any] | None:
    """The stage's result if an earlier attempt of this run finished it; a failure only
    when ``retry`` is off (a full disk, an OOM or a kill need not fail a run for good).

    The bench stage always runs again: it resumes cell by cell by itself.
    """
    if stage.kind == "bench":
        return None
    done = wd.stage(stage.name)
    own = [r for r in stored if stage.matches(r)]
    if done is None and own:  # stored, but killed before the manifest
        done = wd.finish(stage.name, dict(stage.from_records(own), seconds=None))
    return None if retry and done is not None and done.get("status") == "failed" else done
