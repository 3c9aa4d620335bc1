"""``dlbench verify REFERENCE CANDIDATE`` as a Python API: any two runnable artifacts,
the same fixed inputs through both, judged by the comparator.

Both sides are resolved by the one resolver (``harness.bench.artifacts``, as
``dlbench bench`` resolves them) and run by the one runner family
(``harness.verify.run``): a checkpoint on its framework's runner, an ONNX
file on ONNX Runtime's, a MindIR on MindSpore's, an engine on TensorRT's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io, onnx_summary
from dlbench.converters.tensorrt_runtime import ENGINE_SUFFIXES
from dlbench.core.atomic import check_can_create, write_json
from dlbench.core.errors import UserError
from dlbench.core.flags import comma_list, flag
from dlbench.core.tensors import follow_batch
from dlbench.harness.bench.artifacts import Artifact, resolve
from dlbench.harness.bench.input_args import InputFields
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.formats import MINDIR, ONNX, TRT_ENGINE, ZOO
from dlbench.harness.store import records
from dlbench.harness.store.context import CommandOptions, new_run_id, now_iso
from dlbench.harness.store.results import ResultStore
from dlbench.harness.verify import run as runners
from dlbench.harness.verify.compare import compare, tolerance
from dlbench.harness.verify.inputs import (
    DEFAULT_BATCH_SIZES,
    VERIFY_SEED,
    asked,
    inputs_for_model,
    inputs_for_onnx,
    parse_batch_sizes,
)

# What records call each side (kept from the first schema: reports and old rows use it).
KINDS = {ONNX: "onnx", TRT_ENGINE: "tensorrt", MINDIR: "mindir"}


def kind_of(art: Artifact) -> str:
    return KINDS.get(art.format, "checkpoint")


def artifact_format(art: Artifact) -> str | None:
    """The artifacts-table format of a converted file; None for a checkpoint."""
    return KINDS.get(art.format)


def summary_of(art: Artifact):
    return onnx_summary.summarize(art.onnx_model) if art.format == ONNX else None


def side(path: str, framework: str | None, model: str | None) -> Artifact:
    """One side of a verification, resolved and checked runnable here before any work."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{path}: no such file or directory")
    if p.is_dir() and p.suffix in (".onnx", ".mindir", *ENGINE_SUFFIXES):
        onnx_io.check_readable(p, "model file")  # "is a directory"
    if p.suffix == ".onnx":
        onnx_io.load(p)  # the converters' checks and messages, as build's
        onnx_io.session(p)  # an operator ONNX Runtime lacks: refused now
    elif p.suffix in ENGINE_SUFFIXES:
        from dlbench.harness.backends.tensorrt import availability_problems, check_engine_here

        problems = availability_problems()  # the machine is the reason, whatever the file
        if problems:
            raise UserError(f"{path}: cannot run a TensorRT engine here: " + "; ".join(problems))
        check_engine_here(p)
    art = resolve(path, model, framework)
    if art.format == ZOO:
        raise UserError(f"{path}: verify compares files; give a checkpoint or a model file")
    if art.format not in (ONNX, TRT_ENGINE, MINDIR):
        from dlbench.harness.machine.frameworks import require
        from dlbench.models.registry import get_model

        require(art.ref.framework)
        spec = get_model(art.ref.model)
        if art.ref.framework not in spec.builders:
            raise UserError(f"model {spec.name!r} has no {art.ref.framework} implementation")
    return art


def inputs_for(
    reference: Artifact, candidate: Artifact, batch_sizes: Sequence[int], seed: int, given: Any = None
) -> list[Any]:
    """The fixed inputs: from the ONNX signature by the user's input options (``given``)
    where they set any; else the zoo model's when either side names one, else from
    the ONNX shape."""
    for s in (reference, candidate) if not asked(given) else ():
        try:
            return inputs_for_model(s.ref.model, batch_sizes, seed)
        except UserError:
            continue
    for s in (reference, candidate):
        if s.format == ONNX:
            return inputs_for_onnx(summary_of(s), batch_sizes, seed, s.ref.path, given)
    raise UserError(
        f"cannot tell what inputs {reference.label} and {candidate.label} take: "
        f"give a checkpoint or an ONNX file on one side"
    )


@dataclass
class VerifyRequest(CommandOptions, InputFields):
    """Each field a flag sets declares it (``core.flags``): ``dlbench verify``'s parser
    comes from here."""

    reference: str = flag("reference", metavar="REFERENCE", help="the source: checkpoint or fp32 ONNX")
    candidate: str = flag("candidate", metavar="CANDIDATE", help="the converted model")
    precision: str | None = flag(  # None: the candidate's own
        "--precision",
        default=None,
        choices=("fp32", "fp16", "int8", "best"),
        help="tolerance to apply (default: the candidate's precision)",
    )
    batch_sizes: tuple[int, ...] = flag(
        "--batch-sizes",
        default=DEFAULT_BATCH_SIZES,
        type=comma_list(int),
        read=tuple,
        help="batch sizes to run (default {default})",
    )
    seed: int = flag("--seed", default=VERIFY_SEED, type=int, help="seed of the inputs")
    framework: str | None = flag("--framework", "-f", default=None, help="framework of a bare checkpoint")
    model: str | None = flag("--model", "-m", default=None, help="zoo model of a bare checkpoint")
    # The precision's tolerance, bound by bound (None: the precision's own).
    rtol: float | None = flag(
        "--rtol", default=None, type=float, help="max abs diff bound: atol + rtol × max|reference|"
    )
    atol: float | None = flag("--atol", default=None, type=float)
    min_cosine: float | None = flag("--min-cosine", default=None, type=float)
    min_top1: float | None = flag("--min-top1", default=None, type=float)
    layers: bool = flag(  # per-layer SQNR of an INT8 ONNX against fp32 ONNX
        "--layers",
        default=False,
        switch=True,
        help="int8 ONNX: also compare every layer with the fp32 ONNX source and print the worst by SQNR",
    )

    @property
    def overrides(self) -> dict[str, float | None]:
        return {
            "rtol": self.rtol,
            "atol": self.atol,
            "min_cosine": self.min_cosine,
            "min_top1": self.min_top1,
        }


def verify_files(req: VerifyRequest) -> dict[str, Any]:
    """Run both files on the same fixed inputs and judge the candidate; one ``verify`` record."""
    batch_sizes = parse_batch_sizes(req.batch_sizes)
    if req.threads is not None and req.threads < 1:
        raise UserError(f"--threads must be at least 1, got {req.threads}")
    ref = side(req.reference, req.framework, req.model)
    cand = side(req.candidate, req.framework, req.model)
    notes = []
    signature = ref.signature or cand.signature
    if signature:
        batch_sizes, note = follow_batch(signature, batch_sizes, "verified")
        notes += [note] if note else []
    precision = req.precision or cand.precision or "fp32"
    tol = tolerance(precision, **req.overrides)
    if cand.format == TRT_ENGINE:
        profile = next(iter((cand.ref.meta.get("profile") or {}).values()), None)
        if profile:
            lo, hi = profile["min"][0], profile["max"][0]
            outside = [b for b in batch_sizes if not lo <= b <= hi]
            if outside:
                raise UserError(
                    f"--batch-sizes {','.join(map(str, outside))}: outside the "
                    f"engine's profile, batch {lo} to {hi}"
                )
    if req.layers and not (ref.format == cand.format == ONNX and precision == "int8"):
        raise UserError("--layers compares an INT8 ONNX candidate with its fp32 ONNX source")
    if req.json_path:
        check_can_create(req.json_path)
    ResultStore(req.db).check_writable()
    inputs = inputs_for(ref, cand, batch_sizes, req.seed, req)
    threads = ThreadConfig.default(req.threads)
    env = cell_environment(threads)
    identity = {
        "reference": _identity_of(ref),
        "candidate": _identity_of(cand),
        "precision": precision,
        "batch_sizes": list(batch_sizes),
        "seed": req.seed,
    }
    record = records.new_record(
        "verify",
        run_id=new_run_id(),
        identity=identity,
        started=now_iso(),
        argv=req.argv,
        env=env,
        device="gpu" if cand.format == TRT_ENGINE else "cpu",
    )
    record.update(
        {
            "model": ref.ref.model or cand.ref.model,
            "framework": ref.ref.framework or cand.ref.framework,
            "backend": artifact_format(cand) or kind_of(cand),
            "precision": precision,
            "notes": notes,
            "intra_op_threads": threads.intra_op,
            "inter_op_threads": threads.inter_op,
        }
    )
    record["context"].update(
        {
            "reference": {"path": ref.ref.path, "kind": kind_of(ref)},
            "candidate": {"path": cand.ref.path, "kind": kind_of(cand)},
        }
    )
    start = time.perf_counter()
    verdict, error = None, None
    try:
        ref_out, ref_info = runners.outputs(ref.ref, inputs, env=env, timeout=req.timeout, threads=threads)
        cand_out, cand_info = runners.outputs(
            cand.ref, inputs, env=env, timeout=req.timeout, threads=threads, precision=precision
        )
        record["context"].update(runners.what_ran(ref_info, cand_info))
        verdict = compare(ref_out, cand_out, tol, batch_sizes, req.seed, model=record["model"])
        if req.layers:
            from dlbench.harness.verify.layers import layer_errors

            record["metrics"]["layer_errors"] = layer_errors(
                ref.ref.path, cand.ref.path, inputs, threads=threads.intra_op
            )
    except runners.RunFailed as exc:
        error = str(exc)
        if exc.outcome is not None:
            record["context"].update(traceback=exc.outcome.traceback, log_tail=exc.outcome.log_tail)
    record["duration_s"] = time.perf_counter() - start
    record["metrics"]["verify_s"] = record["duration_s"]
    records.finish(record, verdict, error=error)
    artifact = None
    if artifact_format(cand) and verdict is not None:
        artifact = records.artifact_row(
            Path(cand.ref.path),
            cand.sha256,
            artifact_format(cand),
            precision,
            model=record["model"],
            framework=record["framework"],
            hop="verify",
            source_path=Path(ref.ref.path),
            source_sha256=ref.sha256,
        )
        record["context"]["candidate"]["sha256"] = cand.sha256
        if cand.format == ONNX:
            record["metrics"]["node_count"] = summary_of(cand).node_count
        record["metrics"]["file_size_bytes"] = Path(cand.ref.path).stat().st_size
    records.store(req.db, record, artifact)
    if req.json_path:
        write_json(req.json_path, [record])
    return record


def _identity_of(art: Artifact) -> dict[str, Any]:
    return {"kind": kind_of(art), "sha256": art.sha256}
