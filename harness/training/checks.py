"""What ``dlbench train`` refuses before any run starts: each bad option, framework,
device, data set or topology is one ``UserError`` line, and nothing is written until
every check passed (the results database, created by its own check, comes last)."""

from __future__ import annotations

from pathlib import Path

from dlbench.core.atomic import check_can_create
from dlbench.core.errors import UserError
from dlbench.core.frameworks import get_framework
from dlbench.harness.cells import envs, mathmode
from dlbench.harness.cells.allocator import check as check_allocator
from dlbench.harness.machine.fingerprint import fingerprint
from dlbench.harness.machine.frameworks import require
from dlbench.harness.store.results import ResultStore
from dlbench.harness.training import scaling
from dlbench.harness.training.base import DEVICES, PRECISIONS
from dlbench.harness.training.request import TrainRequest
from dlbench.models.registry import get_model

MANIFEST = "manifest.json"


def model_spec(req: TrainRequest):
    """The zoo spec, or one made from a user's model (its framework probed in cells)."""
    if req.user:
        from dlbench.harness.training.user import spec_of_request

        return spec_of_request(req)
    if req.model is None:
        raise UserError("give a zoo model name, a model file, or --model-from MODULE:CALLABLE")
    spec = get_model(req.model)
    for option, value in (
        ("--weights", req.weights),
        ("--shape", req.shapes),
        ("--input", req.inputs),
        ("--int-range", req.int_ranges),
        ("--loss-output", req.loss_output),
    ):
        if value:
            raise UserError(f"{option} is for a model of your own; {req.model} is a zoo model")
    if req.objective not in (None, spec.objective):
        raise UserError(f"--objective {req.objective}: zoo model {spec.name} trains for {spec.objective}")
    return spec


def validate(req: TrainRequest, spec=None) -> None:
    spec = spec or model_spec(req)
    if not req.frameworks:
        raise UserError("no framework given")
    envs.check_specs(req.with_specs)
    for name in req.frameworks:
        if not envs.provides(req.with_specs, get_framework(name).distribution):
            require(name)
        if name not in spec.builders:
            raise UserError(f"model {spec.name!r} has no {name} implementation")
    for option, value, low in (
        ("--batch-size", req.batch_size, 1),
        ("--steps", req.steps, 1),
        ("--warmup-steps", req.warmup_steps, 0),
        ("--threads", req.threads, 1),
        ("--inter-op-threads", req.inter_op_threads, 1),
    ):
        if value is not None and value < low:
            raise UserError(f"{option} must be at least {low}, got {value}")
    if req.learning_rate is not None and not req.learning_rate > 0:
        raise UserError(f"--lr must be positive, got {req.learning_rate}")
    if req.device not in DEVICES:
        raise UserError(f"--device must be one of {', '.join(DEVICES)}, got {req.device!r}")
    check_allocator(req.allocator)
    if req.precision not in PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got {req.precision!r}")
    fp = fingerprint()
    if req.device == "gpu" and not fp["gpus"]:
        raise UserError("--device gpu: no NVIDIA GPU on this machine (nvidia-smi found none)")
    if req.precision == mathmode.TF32 and (why := mathmode.tf32_reason(req.device)):
        raise UserError(f"--precision tf32: {why}")
    mathmode.check_env(req.precision)
    if req.device == "ascend" and not fp["ascend"]:
        raise UserError("--device ascend: no Ascend NPU on this machine (no /dev/davinci*)")
    _validate_data(req, spec)
    if req.devices is not None:
        if not req.devices:
            raise UserError("--devices: give at least one count, e.g. --devices 1,2")
        if req.user:
            raise UserError("--devices: data-parallel training is for zoo models")
        if req.eager:
            raise UserError("--eager: data-parallel steps run compiled; leave out --eager or --devices")
        for n in req.devices:
            scaling.check(
                scaling.Topology(
                    n, req.nodes, req.node_rank, req.master_addr, req.master_port, tuple(req.node_addrs)
                ),
                req.frameworks,
            )
            scaling.split_batch(req.batch_size or spec.default_batch_size, n * req.nodes, req.scaling)
    elif req.nodes != 1:
        raise UserError("--nodes needs --devices (the devices per node)")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    for name in req.frameworks:
        check_can_create(Path(req.out) / spec.name / name / MANIFEST)
    if req.json_path:
        check_can_create(req.json_path)
    ResultStore(req.db).check_writable()  # last: it creates the database


def _validate_data(req: TrainRequest, spec) -> None:
    """Refuse unreadable or unsuitable data here, before any run starts (the reader's
    constructor only looks; decoding happens in the run)."""
    from dlbench.harness.data import open_dataset
    from dlbench.harness.data.base import check_batch

    ds = open_dataset(req.data, spec)
    train_size = ds.split_sizes().get("train")
    if train_size is not None:
        check_batch(ds, req.batch_size or spec.default_batch_size, train_size)
    if req.eval_samples is not None and req.eval_samples < 1:
        raise UserError(f"--eval-samples must be at least 1, got {req.eval_samples}")
    if req.eval and not ds.eval_known_late:
        ds.require_eval()
