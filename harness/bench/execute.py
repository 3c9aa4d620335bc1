"""``dlbench bench`` as a Python API: plan the cells, run each in its own process, store it.

request (checked once) -> plan of cells -> launcher -> cell process -> record -> store.
Each cell runs through ``harness.cells.launcher.run_cell`` with a per-cell timeout, on this
machine or, with ``--executor ray``, on a Ray cluster's node (``harness.executors``):
a crash, an out-of-memory kill or a hang is that cell's recorded failure and the
sweep goes on.  Each finished cell is stored at once (one SQLite transaction)
and the ``--json`` file is rewritten atomically, so an interrupted sweep leaves
complete records only, and ``--resume`` skips cells whose identity already has
a stored, non-failed record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.core.atomic import scratch, write_json
from dlbench.core.errors import UserError
from dlbench.harness.backends.base import RunConfig
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.bench.payload import CellPayload
from dlbench.harness.bench.peak import ensure_peaks
from dlbench.harness.bench.plan import Cell, identity_key, validate
from dlbench.harness.bench.record import make_record, summary
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cells.launcher import CellOutcome
from dlbench.harness.executors import Executor, Needs, open_executor
from dlbench.harness.machine.fingerprint import fingerprint
from dlbench.harness.output.progress import Progress, open_sweep, read_progress
from dlbench.harness.store.context import new_run_id, now_iso
from dlbench.harness.store.records import keep
from dlbench.harness.store.results import ResultStore, sweep_store


def payload(c: Cell, req: BenchRequest, progress_path: str) -> dict[str, Any]:
    """What the cell's process (``bench.child``) is told: a ``CellPayload`` as JSON."""
    art = c.artifact
    full_shapes = {}
    if art.signature is not None:
        p = inputs_mod.plan(art.signature, c.batch_size, c.shapes, c.int_ranges, art.graph_ranges, c.given)
        full_shapes = {i.name: list(i.shape) for i in p.inputs}
    run = RunConfig(
        device=c.device,
        precision=c.precision,
        intra_op_threads=c.intra_op,
        inter_op_threads=c.inter_op,
        device_id=req.device_id,
        options=dict(c.options),
        seed=req.seed,
        max_batch=c.batch_size,
        min_batch=1 if c.scenario == "server" else c.batch_size,
        shapes=full_shapes,
    )
    return CellPayload(
        backend=c.backend.name,
        artifact=art.ref,
        run=run,
        scenario=c.scenario,
        batch_size=c.batch_size,
        rule=req.rule,
        shapes=dict(c.shapes),
        int_ranges=dict(c.int_ranges),
        graph_ranges=dict(art.graph_ranges),
        given={k: g.to_dict() for k, g in c.given.items()},
        signature=list(art.signature) if art.signature else None,
        scenario_params=req.server_params() if c.scenario == "server" else {},
        seed=req.seed,
        progress_path=progress_path,
        packages=bool(c.env),
    ).to_json()


def _watch(
    executor: Executor,
    payload: dict[str, Any],
    env: dict[str, str],
    timeout: float | None,
    needs: Needs,
    bar: Progress,
    progress_path: str,
) -> tuple[CellOutcome, dict[str, Any]]:
    """Run the cell on a thread so the main one can draw its progress and take Ctrl-C."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["outcome"] = executor.run("bench", payload, env=env, timeout=timeout, needs=needs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
            bar.update(read_progress(progress_path))
    except BaseException:
        executor.interrupt()
        worker.join(10)
        raise
    if "error" in box:
        raise box["error"]
    return box["outcome"]


def _resumed(req: BenchRequest, store: ResultStore, keys: list[str]) -> tuple[set[str], list[dict]]:
    """The cells a resume skips, and their stored records in plan order."""
    if req.resume_run:
        done = store.finished_cell_keys(keys, run_id=req.resume_run)
        scope, scope_params = "run_id = ?", [req.resume_run]
    else:
        done = store.finished_cell_keys(keys) if req.resume else set()
        scope, scope_params = "status != 'failed'", []
    if not done:
        return done, []
    previous = {}
    for r in store.records(
        f"kind = 'bench' AND {scope} AND cell_key IN ({', '.join('?' * len(done))})",
        scope_params + list(done),
    ):
        previous[r["cell_key"]] = r
    return done, [dict(previous[k], resumed=True) for k in keys if k in previous]


def _run_repeats(
    cell: Cell, req: BenchRequest, executor: Executor, bar: Progress, progress_path: str
) -> tuple[list[CellOutcome], dict[str, Any] | None]:
    """The cell ``--repeats`` times, each in a fresh process; the first failure ends it.
    A --with environment that cannot be made is the cell's failure, with uv's reason.
    Also where the cell ran: repeats after the first run on the first one's node."""
    from dlbench.harness.cells import envs

    overlay, env_error = envs.prepare(cell.env) if cell.env else (None, None)
    if env_error:
        return [CellOutcome("failed", error=env_error)], None
    outcomes, ran = [], None
    needs = Needs(cpus=cell.intra_op, device=cell.device)
    for _ in range(req.repeats):
        Path(progress_path).unlink(missing_ok=True)
        try:
            outcome, where = _watch(
                executor,
                payload(cell, req, progress_path),
                cell.environment(overlay),
                req.timeout,
                needs,
                bar,
                progress_path,
            )
        except BaseException:
            bar.abandon()  # Ctrl-C: the CLI's message gets a clean line
            raise
        if outcome.status == "usage_error":
            bar.abandon()
            raise UserError(f"{cell.label}: {outcome.error}")
        outcomes.append(outcome)
        ran = ran or where
        node = where.get("executor", {}).get("node", {}).get("node_id")
        needs = Needs(needs.cpus, needs.device, node=needs.node or node)
        if not outcome.ok:
            break
    return outcomes, ran


def run_bench(
    req: BenchRequest,
    show_progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    refusals: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Run the sweep; return one record per cell (failures included).

    Raises UserError for bad input — before any cell runs, or when a cell
    finds the request unsatisfiable (records finished until then are kept).
    Given ``refusals`` (a list), a cell's refusal goes there instead and the sweep
    goes on: one file a backend cannot read is that cell's problem, not the sweep's
    (the CLI then ends with the refusals; ``synth validate`` leaves the file out).
    """
    cells, notes = validate(req)
    store = sweep_store(req.db, req.json_path)
    fp = fingerprint()
    run_id = new_run_id()
    keys = [identity_key(c, req, fp["machine_id"]) for c in cells]
    done, records = _resumed(req, store, keys)
    executor = open_executor(req.executor, req.ray_resources)
    bar = open_sweep(len(cells), len(done), notes, "bench", store.path, show_progress)
    for n in ensure_peaks(store, fp, [c for c, k in zip(cells, keys) if k not in done]):
        bar.note(n)
    with scratch("dlbench-bench") as tmp:
        progress_path = str(Path(tmp, "progress.json"))
        for cell, key in zip(cells, keys):
            if key in done:
                continue
            bar.start(cell.label)
            started = now_iso()
            try:
                outcomes, ran = _run_repeats(cell, req, executor, bar, progress_path)
            except UserError as exc:
                if refusals is None:
                    raise
                refusals.append(str(exc))
                continue
            record = make_record(cell, req, outcomes, fp, run_id, started, store, ran)
            keep(record, store, fp, records, req.json_path, on_record, only_if_absent=req.resume)
            bar.finish(summary(record))
    if req.json_path and (records or not refusals):  # every cell refused: nothing to write
        write_json(req.json_path, records)
    return records
