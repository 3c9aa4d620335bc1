"""What ``dlbench build`` will do, decided before it does anything: the hop, the
source's summary, the output path, the batch sizes and the options the target reads,
with every refusal raised here (exit 2), never after a long build.

Apart from the build itself so that the checks read as one list and the runner stays
about running.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io, onnx_summary
from dlbench.converters.base import BuildOptions, build_hop
from dlbench.core.atomic import check_can_create
from dlbench.core.errors import UserError
from dlbench.core.tensors import fixed_batch, follow_batch
from dlbench.harness.convert import calibration
from dlbench.harness.convert.request import BuildRequest
from dlbench.harness.store.results import ResultStore
from dlbench.harness.verify import inputs as vin


@dataclass
class Plan:
    hop: Any
    source: Path
    summary: Any
    out: Path
    options: BuildOptions
    batch_sizes: tuple[int, ...]
    precision: str
    notes: list[str]


def plan(req: BuildRequest) -> Plan:
    hop = build_hop(req.to)
    opts = req.options
    if hop.precisions:
        opts.precision = req.precision or opts.precision
    elif req.precision not in (None, hop.precision):
        raise UserError(f"--precision {req.precision}: --to {req.to} makes {hop.precision} models")
    _check_options(req.to, hop, opts)
    opts.batch_sizes = vin.parse_batch_sizes(opts.batch_sizes)
    for name, value in (
        ("--workspace-mb", opts.workspace_mb),
        ("--calib-size", opts.calib_size),
        ("--calib-batch", opts.calib_batch),
    ):
        if value < 1:
            raise UserError(f"{name} must be at least 1, got {value}")
    if req.threads is not None and req.threads < 1:
        raise UserError(f"--threads must be at least 1, got {req.threads}")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    # A machine that cannot run the hop at all says so first (no GPU, no TensorRT).
    if hop.requires_backend:
        from dlbench.harness.backends import get_backend

        avail = get_backend(hop.requires_backend).availability()
        if not avail.available:
            raise UserError(f"cannot build --to {req.to} here: {avail.reason}")
    hop.check_available(opts)
    source = Path(req.source)
    model = onnx_io.load(source)
    summary = onnx_summary.summarize(model)
    onnx_io.session(source)
    hop.check_source(model, str(source), opts)  # the hop's own refusals, before any work
    if not hop.from_any_precision and summary.precision != "fp32":
        raise UserError(f"{source}: is already a {summary.precision} model; build from the fp32 ONNX file")
    precision = hop.output_precision(opts)
    if hop.from_any_precision and summary.precision != "fp32":
        if req.precision not in (None, summary.precision):
            raise UserError(
                f"--precision {req.precision}: {source} is a {summary.precision} "
                f"model, and --to {req.to} builds it in its own precision"
            )
        opts.precision = precision = summary.precision
    if opts.calib_data:  # an image set: the model must take those images
        calibration.read_calibration_file(opts.calib_data, vin.image_shape_of(summary, str(source))[0])
    batch_sizes, note = follow_batch(
        summary.inputs, vin.parse_batch_sizes(req.verify_batch_sizes), "verified"
    )
    notes = [note] if note else []
    fixed = fixed_batch(summary.inputs)
    if fixed is not None:
        # The model takes no other batch: calibration and an engine profile follow it too.
        if hop.calibrates(opts) and opts.calib_batch != fixed:
            notes.append(f"calibrated in batches of {fixed} (asked for {opts.calib_batch})")
            opts.calib_batch = fixed
    batch_sizes = hop.profile_batch_sizes(opts, tuple(batch_sizes), fixed)
    out = Path(req.out) if req.out else hop.default_out(source, opts)
    if out.resolve() == source.resolve():
        raise UserError(f"--out {out}: would overwrite the source model")
    check_can_create(out)
    for extra in (opts.timing_cache, opts.calib_cache, req.json_path):
        if extra:
            check_can_create(extra)
    # The TensorRT cell runs in a scratch directory: it needs absolute paths.
    from dlbench.harness.evaluate.data import is_calibration_set

    named_set = is_calibration_set(opts.calib_data)  # --calib-data digits: not a path
    for name in ("timing_cache", "calib_cache", "calib_data"):
        if getattr(opts, name) and not (name == "calib_data" and named_set):
            setattr(opts, name, str(Path(getattr(opts, name)).resolve()))
    ResultStore(req.db).check_writable()
    return Plan(hop, source, summary, out, opts, batch_sizes, precision, notes)


def _check_options(target: str, hop, opts: BuildOptions) -> None:
    """Refuse an option the target does not read (set away from its default), naming the
    targets that do: a silently ignored flag would make a build that is not the one asked."""
    from dlbench.converters.base import option_targets

    default = BuildOptions()
    for name, takers in option_targets().items():
        if name not in hop.options and getattr(opts, name) != getattr(default, name):
            flag = "--" + name.replace("_", "-")
            raise UserError(f"{flag} applies to --to {' / '.join(takers)}, not --to {target}")
