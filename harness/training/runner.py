"""``dlbench train`` as a Python API: validate, run each framework in its own
process, store the record, write checkpoint + manifest atomically."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from dlbench.core.atomic import staged_directory, write_json
from dlbench.core.errors import UserError
from dlbench.core.version import __version__
from dlbench.harness.cells import envs, mathmode
from dlbench.harness.cells.allocator import identity as allocator_identity
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.launcher import CellOutcome, run_cell
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.data import canonical
from dlbench.harness.machine.fingerprint import fingerprint
from dlbench.harness.output.tables import spec_unit
from dlbench.harness.store import records
from dlbench.harness.store.context import new_run_id, now_iso
from dlbench.harness.store.results import ResultStore
from dlbench.harness.training import scaling
from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.checks import MANIFEST, model_spec, validate
from dlbench.harness.training.payload import TrainPayload
from dlbench.harness.training.request import TrainRequest
from dlbench.models.registry import USER_FAMILY


def child(message: dict[str, Any]) -> dict[str, Any]:
    """Runs inside the cell process: only here is a framework imported."""
    from dlbench.harness.training.loop import run
    from dlbench.harness.training.user import from_dict

    payload = TrainPayload.from_json(message)
    spec = from_dict(payload.user) if payload.user else None
    result = run(payload.config, Path(payload.out_dir), spec)
    return {**result, "packages": envs.imported_packages() if payload.packages else None}


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def train(req: TrainRequest, progress: Callable[[str], None] = _progress) -> list[dict[str, Any]]:
    """Train ``req.model`` in each framework; return one record per framework.

    Raises UserError (exit 2) for bad input, including a child that found the
    request unsatisfiable (e.g. amp where the framework has none); runtime
    failures are returned as records with status "failed".
    """
    spec = model_spec(req)
    if not req.frameworks:
        req = replace(req, frameworks=list(spec.frameworks))
    validate(req, spec)
    from dlbench.harness.training import user

    user_payload = user.to_dict(spec) if user.is_user(spec) else None
    threads = ThreadConfig.default(req.threads, req.inter_op_threads)
    store = ResultStore(req.db)
    fp = fingerprint()
    run_id = new_run_id()
    # A user's model's batch is its input plan's (a model with a fixed batch keeps it).
    batch = spec.default_batch_size if user_payload else req.batch_size or spec.default_batch_size
    lr = spec.default_lr if req.learning_rate is None else req.learning_rate
    records, usage_errors = [], []
    cells = [
        (name, n, w)
        for name in req.frameworks
        for n in (req.devices or [None])
        for w in (req.with_specs or [""])
    ]
    for i, (name, devices, with_spec) in enumerate(cells, 1):
        topo = None if devices is None else _topology(req, devices, i - 1)
        intra = threads.intra_op if topo is None else scaling.cores_per_rank(devices, req.threads)
        cfg = TrainConfig(
            model=spec.name,
            framework=name,
            batch_size=batch,
            steps=req.steps,
            warmup_steps=req.warmup_steps,
            device=req.device,
            precision=req.precision,
            intra_op_threads=intra,
            inter_op_threads=threads.inter_op,
            seed=req.seed,
            data=canonical(req.data),
            learning_rate=lr,
            eval=req.eval,
            eval_samples=req.eval_samples,
            eager=req.eager,
            distributed=topo is not None,
        )
        overlay, env_error = envs.prepare(with_spec) if with_spec else (None, None)
        extra = {
            **mathmode.environment(req.device, req.precision),
            **(envs.environment(overlay) if overlay else {}),
        }
        cell_env = cell_environment(ThreadConfig(intra, threads.inter_op), req.allocator, extra)
        launch, where = None, f" [{with_spec}]" if with_spec else ""
        if topo is not None:
            cfg.batch_size = scaling.split_batch(batch, topo.world_size, req.scaling)
            launch = scaling.launcher(name, topo, cell_env, req.device)
            where += f" × {topo.world_size} ({req.scaling} scaling, {cfg.batch_size} per device)"
        progress(
            f"[{i}/{len(cells)}] training {spec.name} in {name}: batch {cfg.batch_size}, "
            f"{req.warmup_steps} warm-up + {req.steps} measured steps on "
            f"{req.device}{where}"
        )
        final_dir = (
            Path(req.out)
            / spec.name
            / (
                name
                + ("" if topo is None else f"-{topo.world_size}dev")
                + (f"-with-{with_spec.replace('==', '-')}" if with_spec else "")
            )
        )
        started = now_iso()
        try:
            with staged_directory(final_dir) as stage:
                outcome = (
                    CellOutcome("failed", error=env_error)
                    if env_error
                    else run_cell(
                        "train" if topo is None else "train_rank",
                        TrainPayload(
                            config=cfg,
                            out_dir=str(stage.resolve()),
                            user=user_payload,
                            packages=bool(with_spec),
                            devices_per_node=devices,
                        ).to_json(),
                        env=cell_env,
                        timeout=req.timeout,
                        launcher=launch,
                    )
                )
                if outcome.status == "usage_error":
                    raise UserError(outcome.error)
                record = _record(req, cfg, spec, outcome, fp, run_id, started, cell_env, topo, with_spec)
                if topo is not None and topo.node_rank > 0:
                    raise _OtherNode()
                if outcome.ok:
                    record["context"]["checkpoint"] = str(final_dir / outcome.result["checkpoint"])
                record["id"] = store.add(record, fp)
                if not outcome.ok:
                    raise _Failed()
                if user_payload is None:  # a user's model is saved in its own format
                    write_json(stage / MANIFEST, _manifest(spec, cfg, outcome.result, record))
        except UserError as exc:
            usage_errors.append(f"{name}: {exc}")
            progress(f"    {name}: {exc}")
            continue
        except _Failed:
            progress(f"    {name} FAILED: {record['error']}")
        except _OtherNode:
            state = "done" if outcome.ok else f"FAILED: {record['error']}"
            progress(f"    node {topo.node_rank} {state}; node 0 stores the record")
        else:
            per = spec_unit(spec).replace("/sec", "/s")
            saved = record["context"]["checkpoint"] if user_payload else final_dir
            progress(f"    {record['throughput_sps']:.2f} {per}, checkpoint in {saved}")
        records.append(record)
    if req.json_path:
        write_json(req.json_path, records)
    if usage_errors:
        raise UserError("; ".join(usage_errors))
    return records


class _Failed(Exception):
    """A cell failed at run time: its record is stored, its directory discarded."""


class _OtherNode(Exception):
    """A node other than the first ran its ranks: node 0 stores the cell's record (every
    rank gathered the same figures) and the checkpoint; this node keeps neither."""


def _topology(req: TrainRequest, devices: int, index: int) -> scaling.Topology:
    """The cell's topology; one node picks a free port per cell, several nodes count up
    from --master-port (every node runs the same sweep, so they agree)."""
    stride = max(req.devices) + 1  # TensorFlow's workers listen after the master port
    port = req.master_port + index * stride if req.master_port else scaling.free_port()
    return scaling.Topology(devices, req.nodes, req.node_rank, req.master_addr, port, tuple(req.node_addrs))


def _record(
    req: TrainRequest,
    cfg: TrainConfig,
    spec,
    outcome,
    fp,
    run_id,
    started,
    env,
    topo: scaling.Topology | None = None,
    with_spec: str = "",
) -> dict[str, Any]:
    result = dict(outcome.result)
    runtime = result.pop("runtime", {})
    packages = result.pop("packages", None)
    data = result.pop("data", None)
    identity = {
        "model": spec.name,
        "framework": cfg.framework,
        "device": cfg.device,
        "precision": cfg.precision,
        "batch_size": cfg.batch_size,
        "steps": cfg.steps,
        "warmup_steps": cfg.warmup_steps,
        "threads": [cfg.intra_op_threads, cfg.inter_op_threads],
        "data": cfg.data,
        "seed": cfg.seed,
        "machine_id": fp["machine_id"],
    }
    if cfg.eval:  # only then, so that runs without --eval keep their keys
        identity["eval"] = [True, cfg.eval_samples]
    if cfg.eager:  # likewise
        identity["eager"] = True
    user = spec.config.get("user") if spec.family == USER_FAMILY else None
    if user:
        identity.update(
            user_source=user["source"],
            objective=spec.objective,
            loss_output=user["output"],
            inputs={i.name: list(i.shape) for i in spec.inputs},
        )
    identity.update(allocator_identity(req.allocator))
    if topo is not None:  # a run without --devices keeps its keys
        identity.update(devices=topo.devices, nodes=topo.nodes, scaling=req.scaling)
    if with_spec:  # and one without --with
        identity["with"] = with_spec
    metrics = {k: v for k, v in result.items() if k not in ("framework_version", "layout", "checkpoint")}
    metrics["peak_rss_mb"] = outcome.peak_rss_mb
    metrics["cell_wall_s"] = outcome.wall_s
    record = records.new_record(
        "train",
        run_id=run_id,
        identity=identity,
        started=started,
        argv=req.argv,
        device=cfg.device,
        fp=fp,
        env=env,
        status="ok" if outcome.ok else "failed",
        error=outcome.error,
        duration_s=outcome.wall_s,
        model=spec.name,
        framework=cfg.framework,
        framework_version=result.get("framework_version")
        or fp["versions"].get({"pytorch": "torch"}.get(cfg.framework, cfg.framework)),
        precision=cfg.precision,
        batch_size=cfg.batch_size,
        intra_op_threads=cfg.intra_op_threads,
        inter_op_threads=cfg.inter_op_threads,
        iterations=cfg.steps,
        warmup_iterations=cfg.warmup_steps,
        throughput_sps=result.get("throughput_sps"),
        peak_rss_mb=outcome.peak_rss_mb,
        metrics=metrics,
    )
    record["context"].update(
        {
            "config": cfg.to_dict(),
            "runtime": runtime,
            "math_mode": mathmode.of(runtime),
            "layout": result.get("layout"),
            "data": data,
            **(
                {
                    "user_model": {
                        k: user[k]
                        for k in ("fills", "output", "output_shape", "label_shape", "outputs", "notes")
                    },
                    "objective": spec.objective,
                }
                if user
                else {}
            ),
            "traceback": outcome.traceback,
            "log_tail": None if outcome.ok else outcome.log_tail,
            **envs.record_context(with_spec, packages),
            **req.extra_context,
        }
    )
    if topo is not None:
        gpu = (runtime.get("device_name") or runtime.get("gpu_name")) if outcome.ok else None
        record["context"].update(
            resource=scaling.resource(topo, cfg.device, cfg.intra_op_threads, gpu),
            topology={**topo.to_dict(), "launcher": scaling.LAUNCHERS[cfg.framework]},
            scaling={
                "mode": req.scaling,
                "per_device_batch": cfg.batch_size,
                "global_batch": cfg.batch_size * topo.world_size,
            },
            data_parallel_note=scaling.NOTE,
        )
        if outcome.ok:
            record["peak_rss_mb"] = metrics["peak_rss_mb"] = result.get("peak_rss_mb_max")
    return record


def _manifest(spec, cfg: TrainConfig, result: dict[str, Any], record: dict[str, Any]) -> dict:
    """What later stages (export, bench) need to rebuild and feed the network."""
    return {
        "format": "dlbench-checkpoint/1",
        "model": spec.name,
        "framework": cfg.framework,
        "framework_version": result["framework_version"],
        "checkpoint": result["checkpoint"],
        "layout": result["layout"],
        "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in spec.inputs],
        "num_classes": spec.num_classes,
        "model_config": dict(spec.config),
        "batch_size": cfg.batch_size,
        "steps": cfg.steps,
        "warmup_steps": cfg.warmup_steps,
        "precision": cfg.precision,
        "seed": cfg.seed,
        "data": cfg.data,
        "record_id": record.get("id"),
        "run_id": record["run_id"],
        "dlbench_version": __version__,
        "created_at": record["started_at"],
    }
