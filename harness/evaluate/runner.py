"""``dlbench eval`` as a Python API: check everything, run the eval cell, store an ``eval`` record.

Everything that can be refused is refused before the cell starts (exit 2):
an artifact that is not there or not readable, a zoo name (random weights
have no accuracy worth storing), a backend that does not take the artifact or
is not available here, a data set without a held-out split or that does not
fit the model.  A cell that crashes or times out is stored as a ``failed``
record, as every other command does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dlbench.core.devices import inference_name
from dlbench.core.errors import UserError
from dlbench.core.flags import flag
from dlbench.core.tensors import class_count, follow_batch
from dlbench.harness.backends import get_backend
from dlbench.harness.backends.base import RunConfig
from dlbench.harness.cells import mathmode
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.launcher import run_cell
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.evaluate import data
from dlbench.harness.evaluate.payload import EvalPayload
from dlbench.harness.formats import ZOO, default_backend
from dlbench.harness.store.context import CommandOptions


@dataclass
class EvalRequest(CommandOptions):
    """Each field a flag sets declares it (``core.flags``): ``dlbench eval``'s parser."""

    artifact: str = flag(
        "artifact", metavar="ARTIFACT", help="ONNX file, TensorRT engine, MindIR, or a dlbench train output"
    )
    data: str = flag(
        "--data",
        default="digits",
        metavar="DATA",
        help="data set with a held-out split, as for 'dlbench train --data' (default: digits, "
        "scikit-learn's bundled handwritten digits)",
    )
    backend: str | None = flag(
        "--backend",
        "-b",
        default=None,
        help="backend to run on (default: the artifact format's own backend, the framework for a checkpoint)",
    )
    device: str | None = flag("--device", default=None, help="cpu, cuda or ascend (default: the backend's)")
    batch_size: int = flag("--batch-size", default=64, type=int, help="inference batch (default {default})")
    limit: int | None = flag(
        "--limit", default=None, type=int, help="score at most this many held-out samples (default: all)"
    )
    model: str | None = flag("--model", "-m", default=None, help="zoo model of a bare checkpoint")


@dataclass
class _Plan:
    art: Any  # harness.bench.artifacts.Artifact
    backend: Any
    device: str
    precision: str
    spec: Any
    spec_payload: dict[str, Any]
    data: str
    threads: ThreadConfig
    batch_size: int
    notes: list[str]


def _classes_of(art) -> int | None:
    if art.onnx_model is None:
        return None
    from dlbench.converters.onnx_summary import summarize

    outputs = summarize(art.onnx_model).outputs
    return class_count(outputs[0]) if outputs else None


def plan(req: EvalRequest) -> _Plan:
    from dlbench.core.atomic import check_can_create
    from dlbench.harness.bench.artifacts import resolve
    from dlbench.harness.data import canonical
    from dlbench.harness.store.results import ResultStore

    for option, value in (
        ("--batch-size", req.batch_size),
        ("--threads", req.threads),
        ("--limit", req.limit),
    ):
        if value is not None and value < 1:
            raise UserError(f"{option} must be at least 1, got {value}")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    art = resolve(req.artifact, req.model)
    if art.format == ZOO:
        raise UserError(
            f"{req.artifact}: a zoo name is the network with random weights; give a "
            f"trained checkpoint (a 'dlbench train' output) or a model file"
        )
    takers = default_backend(art.format)
    if req.backend is None and takers is None:
        raise UserError(
            f"{art.label}: no backend runs a {art.format} artifact by default; name one with --backend"
        )
    backend = get_backend(req.backend or takers)
    if art.format not in backend.formats:
        raise UserError(
            f"{art.label} is a {art.format} artifact; backend {backend.name} takes "
            f"{', '.join(backend.formats)}" + (f" (try --backend {takers})" if takers else "")
        )
    avail = backend.availability()
    if not avail.available:
        raise UserError(f"backend {backend.name} is not available here: {avail.reason}")
    device = inference_name(req.device or "") or backend.default_device()
    if device not in avail.devices:
        raise UserError(f"--device {device}: {backend.name} runs on {', '.join(avail.devices)} here")
    precision = art.own_precision or "fp32"
    chw = None
    if art.signature and len(art.signature) == 1 and len(art.signature[0].shape) == 4:
        chw = [d for d in art.signature[0].shape[1:]]
        if not all(isinstance(d, int) and d > 0 for d in chw):
            chw = None
    spec_payload = {"model": art.ref.model, "chw": chw, "classes": _classes_of(art)}
    spec = data.spec_for(**spec_payload)
    canonical_data = canonical(req.data)
    ds = data.open_heldout(canonical_data, spec)  # refuses a set without a held-out split
    if spec.family == "external" and ds.num_classes not in (None, spec.num_classes):
        # A model dlbench did not train: its class indices are its own data set's, so a
        # set with another class count scores nothing but chance.
        raise UserError(
            f"{ds.describe_source()}: {ds.num_classes} classes, but "
            f"{art.label} scores {spec.num_classes}: its labels are not this data "
            f"set's; give a held-out set labelled with the model's "
            f"{spec.num_classes} classes (--data FILE.npz or an image folder)"
        )
    if req.json_path:
        check_can_create(req.json_path)
    ResultStore(req.db).check_writable()  # last: it creates the database
    (batch_size,), note = follow_batch(art.signature or (), (req.batch_size,), "scored")
    return _Plan(
        art,
        backend,
        device,
        precision,
        spec,
        spec_payload,
        canonical_data,
        ThreadConfig.default(req.threads),
        batch_size,
        [note] if note else [],
    )


def evaluate(req: EvalRequest) -> dict[str, Any]:
    """Score ``req.artifact`` on the held-out split; return its stored ``eval`` record."""
    from dlbench.core.atomic import write_json
    from dlbench.harness.store import records
    from dlbench.harness.store.context import new_run_id, now_iso
    from dlbench.harness.store.results import ResultStore

    p = plan(req)
    art, threads = p.art, p.threads
    options = p.backend.resolve_options({})
    run = RunConfig(
        device=p.device,
        precision=p.precision,
        intra_op_threads=threads.intra_op,
        inter_op_threads=threads.inter_op,
        options=options,
        max_batch=p.batch_size,
        min_batch=1,
    )
    env = cell_environment(
        threads,
        extra={
            **p.backend.environment(options, threads.intra_op, threads.inter_op),
            **mathmode.environment(p.device, p.precision),
        },
    )
    identity = {
        "artifact": {k: v for k, v in art.identity().items() if k != "path"},
        "backend": p.backend.name,
        "device": p.device,
        "precision": p.precision,
        "batch_size": p.batch_size,
        "data": p.data,
        "limit": req.limit,
        "threads": [threads.intra_op, threads.inter_op],
    }
    record = records.new_record(
        "eval",
        run_id=new_run_id(),
        identity=identity,
        started=now_iso(),
        argv=req.argv,
        device=p.device,
        env=env,
    )
    framework = art.ref.framework
    record.update(
        {
            "model": art.ref.model,
            "framework": framework,
            "framework_version": (art.ref.meta or {}).get("framework_version"),
            "backend": p.backend.name,
            "backend_version": p.backend.version(),
            "precision": p.precision,
            "batch_size": p.batch_size,
            "notes": p.notes,
            "intra_op_threads": threads.intra_op,
            "inter_op_threads": threads.inter_op,
        }
    )
    verification = ResultStore(req.db).artifact(art.sha256) if art.sha256 else None
    record["context"].update(
        {
            "artifact": {
                "format": art.format,
                "path": art.ref.path,
                "label": art.label,
                "model": art.ref.model,
                "sha256": art.sha256,
                "meta": art.ref.meta,
                "verification": (verification or {}).get("verdict"),
            },
            "options": options,
            "data_arg": p.data,
        }
    )
    payload = EvalPayload(p.backend.name, art.ref, run, p.data, p.batch_size, req.limit, p.spec_payload)
    start = time.perf_counter()
    outcome = run_cell("eval", payload.to_json(), env=env, timeout=req.timeout)
    if outcome.status == "usage_error":
        raise UserError(outcome.error)
    record["duration_s"] = time.perf_counter() - start
    record["peak_rss_mb"] = outcome.peak_rss_mb
    record["metrics"].update({"peak_rss_mb": outcome.peak_rss_mb, "cell_wall_s": outcome.wall_s})
    if outcome.ok:
        result = outcome.result
        record["status"] = "ok"
        record["iterations"] = result["eval"]["batches"]
        record["backend_version"] = result.get("backend_version") or record["backend_version"]
        record["metrics"].update({"eval": result["eval"], "load_s": result["load_s"]})
        record["context"].update(
            {
                "runtime": result["runtime"],
                "data": result["data"],
                "math_mode": mathmode.of(result["runtime"]),
            }
        )
    else:
        record["status"], record["error"] = "failed", outcome.error
        record["context"].update({"traceback": outcome.traceback, "log_tail": outcome.log_tail})
    records.store(req.db, record, None)
    if req.json_path:
        write_json(req.json_path, [record])
    return record
