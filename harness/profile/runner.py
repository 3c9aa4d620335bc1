"""``dlbench profile``'s request and its one record: the parent's side of the profile cell."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import field_of, flag
from dlbench.harness.backends.onnxruntime import LEVELS
from dlbench.harness.bench.input_args import INPUTS_GROUP, InputFields
from dlbench.harness.store.context import CommandOptions
from dlbench.harness.usermodel import model_from_flag, weights_flag
from dlbench.models.user.hub import named

# Request fields that set a backend's declared option: given for a backend that declares
# no such option, they are refused, not ignored.
OPTION_FIELDS = {"graph_optimization": "--graph-optimization"}


@dataclass(kw_only=True)
class ProfileRequest(InputFields, CommandOptions):
    """Each field a flag sets declares it (``core.flags``)."""

    artifact: str | None = flag(
        "artifact",
        default=None,
        metavar="MODEL",
        help="an ONNX file, or a PyTorch model: a zoo name, TorchScript, torch.export .pt2, "
        f"a 'dlbench train' output, {named('pytorch')} (other frameworks' models: export them first)",
    )
    model_from: str | None = field_of(model_from_flag("profile", INPUTS_GROUP), default=None)
    weights: str | None = field_of(weights_flag(INPUTS_GROUP), default=None)
    batch_size: int = flag("--batch-size", default=1, type=int, help="batch size (default {default})")
    warmup: int = flag("--warmup", default=10, type=int, help="runs before profiling (default {default})")
    iterations: int = flag("--iterations", default=50, type=int, help="profiled runs (default {default})")
    device: str | None = flag(
        "--device", default=None, help="cpu or cuda (a PyTorch model; ONNX files profile on the cpu)"
    )
    device_id: int = flag("--device-id", default=0, type=int, help="GPU index (default {default})")
    precision: str | None = flag(
        "--precision",
        default=None,
        help="fp32, tf32, fp16, bf16 for a PyTorch model (default fp32); an ONNX file runs in its own",
    )
    backend: str | None = flag(
        "--backend",
        "-b",
        default=None,
        help="the backend whose runner and profiler run it (default: the format's own; "
        "an ONNX file on openvino: the CPU plugin's performance counters)",
    )
    graph_optimization: str | None = flag(
        "--graph-optimization",
        default=None,
        choices=LEVELS,
        help="ONNX Runtime's graph optimization level, as bench's (ONNX files; default all)",
    )
    # Backend options (bench's -O): those the profiled backend declares are its settings, so
    # a profile runs as the bench cells it explains (the synthetic benchmark's references).
    options: dict[str, Any] = field(default_factory=dict)
    # False: the caller reads the profile and stores nothing (the advisor's own profiles).
    store: bool = True
    # True: the record keeps every node, not the slowest (the synthetic benchmark's workload).
    all_nodes: bool = False


def profile(req: ProfileRequest) -> dict[str, Any]:
    """Profile ``req.artifact`` in one cell; return its stored ``profile`` record."""
    from dlbench.core.atomic import write_json
    from dlbench.harness.backends import get_backend
    from dlbench.harness.backends.base import RunConfig
    from dlbench.harness.bench import flops
    from dlbench.harness.bench import inputs as inputs_mod
    from dlbench.harness.cells.cellenv import cell_environment
    from dlbench.harness.cells.launcher import run_cell
    from dlbench.harness.cells.threads import ThreadConfig
    from dlbench.harness.profile.child import ProfilePayload
    from dlbench.harness.profile.summary import TOP_NODES, summarize
    from dlbench.harness.store import records
    from dlbench.harness.store.context import new_run_id, now_iso

    for name, value in (("--batch-size", req.batch_size), ("--iterations", req.iterations)):
        if value < 1:
            raise UserError(f"{name} {value}: give at least 1")
    if req.warmup < 0:
        raise UserError(f"--warmup {req.warmup}: give 0 or more")
    art, profiler = _resolve(req)
    backend = get_backend(profiler.backend)
    device, precision, options = _cell_settings(req, art, profiler, backend)

    shapes = art.shapes_for(req.shapes, {})
    plan = inputs_mod.plan(art.signature or [], req.batch_size, shapes, req.int_ranges, art.graph_ranges, {})
    at = {i.name: i.shape for i in plan.inputs}
    by_type = flops.by_op_type(art.onnx_model, at) if profiler.graph_flops else None
    threads = ThreadConfig.default(req.threads)
    # As bench's cell is told: its one batch size and every input's full shape, which an
    # engine that compiles per shape fixes at load (OpenVINO, as bench's cells run it).
    run = RunConfig(
        device,
        precision,
        threads.intra_op,
        threads.inter_op,
        req.device_id,
        options,
        max_batch=req.batch_size,
        min_batch=req.batch_size,
        shapes={k: list(v) for k, v in at.items()},
    )
    env = cell_environment(
        threads,
        extra={
            **backend.environment(options, threads.intra_op, threads.inter_op),
            **backend.math_environment(device, precision, options),
        },
    )
    identity = {
        "artifact": {k: v for k, v in art.identity().items() if k != "path"},
        "backend": backend.name,
        "device": device,
        "device_id": req.device_id,
        "precision": precision,
        "batch_size": req.batch_size,
        "shapes": {k: list(v) for k, v in at.items()},
        "threads": [threads.intra_op, threads.inter_op],
        "options": options,
        "iterations": req.iterations,
    }
    record = records.new_record(
        "profile",
        run_id=new_run_id(),
        identity=identity,
        started=now_iso(),
        argv=req.argv,
        device=device,
        env=env,
    )
    record.update(
        {
            "model": art.ref.model,
            "framework": art.ref.framework,
            "backend": backend.name,
            "precision": precision,
            "batch_size": req.batch_size,
            "intra_op_threads": threads.intra_op,
            "inter_op_threads": threads.inter_op,
        }
    )
    record["context"]["artifact"] = {**art.identity(), "label": art.label}
    record["context"]["options"] = options
    record["context"]["notes"] = list(art.notes)
    payload = ProfilePayload(
        profiler.backend,
        art.ref,
        run,
        [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in art.signature or []],
        req.batch_size,
        {k: list(v) for k, v in shapes.items()},
        {k: list(v) for k, v in req.int_ranges.items()},
        {k: list(v) for k, v in art.graph_ranges.items()},
        req.warmup,
        req.iterations,
    )
    start = time.perf_counter()
    outcome = run_cell("profile", payload.to_json(), env=env, timeout=req.timeout)
    if outcome.status == "usage_error":
        raise UserError(outcome.error)
    record["duration_s"] = time.perf_counter() - start
    if outcome.ok:
        result = outcome.result
        record["status"] = "ok"
        record["backend_version"] = result["backend_version"]
        record["metrics"]["profile"] = summarize(
            result, by_type, req.batch_size, profiler, None if req.all_nodes else TOP_NODES
        )
        record["context"].update({"inputs": result["inputs"], "runtime": result["runtime"]})
    else:
        record["error"] = outcome.error
        record["context"].update({"traceback": outcome.traceback, "log_tail": outcome.log_tail})
    if req.store:
        records.store(req.db, record, None)
    if req.json_path:
        write_json(req.json_path, [record])
    return record


def _cell_settings(req: ProfileRequest, art, profiler, backend) -> tuple[str, str, dict[str, Any]]:
    """The cell's device, precision and backend options, refused as bench refuses them
    (bench's own rules), and where the profiler itself cannot follow."""
    from dlbench.core.devices import inference_name
    from dlbench.harness.bench.plan import cell_precision, device_reason
    from dlbench.harness.cells.mathmode import check_env

    available = backend.availability()
    if not available.available:
        raise UserError(
            f"{art.label}: {profiler.tool} runs on {backend.name}, not available here: {available.reason}"
        )
    device = inference_name(req.device or backend.default_device())
    if device not in (profiler.devices or available.devices):
        why = f"{profiler.tool} profiles on {', '.join(profiler.devices)}" if profiler.devices else ""
        raise UserError(f"--device {device}: {why or device_reason(backend, device)}")
    precision = cell_precision(art, backend, device, req.precision or "auto")
    check_env(precision)
    given = backend.own_options(req.options)
    for name, spelled in OPTION_FIELDS.items():
        value = getattr(req, name)
        if value is not None:
            if backend.option(name) is None:
                raise UserError(f"{spelled}: {art.label} runs on {backend.name}, which has no such option")
            given[name] = value
    return device, precision, backend.resolve_options(given)


def _resolve(req: ProfileRequest):
    """The artifact (bench's resolver) and the profiler its format takes."""
    from dlbench.harness.bench.artifacts import resolve, resolve_code
    from dlbench.harness.formats import FORMATS
    from dlbench.harness.profile.profilers import for_format, profiled_on

    if bool(req.artifact) == bool(req.model_from):
        raise UserError("give one model: a file, a zoo name, a model by name, or --model-from")
    if req.artifact:
        _refuse_early(req.artifact)
        hints = {"shapes": req.shapes, "inputs": req.inputs, "timeout": req.timeout}
        art = resolve(req.artifact, weights=req.weights, **hints)  # a model by name takes them
    else:
        art = resolve_code(
            str(req.model_from), req.weights, shapes=req.shapes, inputs=req.inputs, timeout=req.timeout
        )
    profiler = for_format(art.format, req.backend)
    if profiler is None and req.backend is not None and (takes := profiled_on(art.format)):
        raise UserError(f"--backend {req.backend}: {art.label} is profiled on {', '.join(takes)}, not there")
    if profiler is None:
        raise UserError(_refusal(art.label, FORMATS.get(art.format).description))
    return art, profiler


def _refuse_early(arg: str) -> None:
    """A user's model of a framework no profiler reads, refused before a cell imports that
    framework to probe it (a Keras file, a SavedModel, a keras: name)."""
    from dlbench.harness.formats import user_format
    from dlbench.harness.profile.profilers import for_format
    from dlbench.models import user
    from dlbench.models.user import hub

    path = Path(arg)
    source = user.sniff(path) if path.exists() else hub.parse(arg)
    if source is not None and source.framework and for_format(user_format(source.framework)) is None:
        raise UserError(_refusal(arg, hub.hub_of(source)[0].what if source.kind == "hub" else source.what))


def _refusal(label: str, what: str) -> str:
    from dlbench.harness.profile.profilers import what_profile_reads

    export = f"dlbench export {label}"
    return f"{label}: {what}; dlbench profile reads {what_profile_reads()}: export it first ({export})"
