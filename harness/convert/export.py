"""``dlbench export`` as a Python API: native checkpoint -> ONNX (or MindIR), verified.

Per checkpoint: one export cell (the framework's own process) runs the
checkpoint through the framework's runner on the fixed verification inputs
(the reference) and writes the raw file with the framework's hop; this
process then normalizes the ONNX file (IR version ONNX Runtime reads,
``input``/``logits`` names, symbolic batch, dlbench metadata, checker and
shape inference), runs it through the ONNX Runtime runner on the same
inputs, and lets the comparator judge.  The file is written to a staging directory and
renamed into place when done; a verdict over tolerance keeps the file but
stores it as unverified, and the command exits 1.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dlbench.converters import onnx_io
from dlbench.converters import onnx_summary
from dlbench.converters.base import EXPORT_HOPS, ExportOptions
from dlbench.harness import __version__
from dlbench.models.atomic import check_can_create, write_json
from dlbench.harness.context import CommandOptions, new_run_id, now_iso
from dlbench.models.errors import UserError
from dlbench.harness.results import ResultStore
from dlbench.harness import mathmode, records
from dlbench.harness.backends.base import ONNX, ArtifactRef
from dlbench.harness.cellenv import cell_environment
from dlbench.harness.threads import ThreadConfig
from dlbench.harness.verify import compare as cmp
from dlbench.harness.verify import inputs as vin
from dlbench.harness.verify import run as runners

FORMATS = ("onnx", "mindir")
EXPORTERS = ("torchscript", "dynamo")


@dataclass
class ExportRequest(CommandOptions):
    sources: list[str]
    framework: str | None = None
    model: str | None = None
    out: str | None = None
    options: ExportOptions = field(default_factory=ExportOptions)
    batch_sizes: tuple[int, ...] = vin.DEFAULT_BATCH_SIZES
    seed: int = vin.VERIFY_SEED


@dataclass
class _Plan:
    source: Path
    checkpoint: Path
    manifest: dict[str, Any]
    out: Path


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def plan(req: ExportRequest) -> list[_Plan]:
    """Validate everything before any work: exit 2 here, never after a long export."""
    from dlbench.harness.frameworks import is_installed, require
    from dlbench.models.native import checkpoint_manifest
    from dlbench.models.registry import get_model

    opts = req.options
    if not req.sources:
        raise UserError("no checkpoint given")
    if req.out and len(req.sources) > 1:
        raise UserError("--out names one file; give one checkpoint with it")
    if opts.format not in FORMATS:
        raise UserError(f"--format {opts.format}: choose from {', '.join(FORMATS)}")
    if opts.exporter not in EXPORTERS:
        raise UserError(f"--exporter {opts.exporter}: choose from {', '.join(EXPORTERS)}")
    max_opset = onnx_io.onnx().defs.onnx_opset_version()
    if not 7 <= opts.opset <= max_opset:
        raise UserError(f"--opset {opts.opset}: this onnx supports opsets 7 to {max_opset}")
    if opts.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {opts.batch_size}")
    if req.threads is not None and req.threads < 1:
        raise UserError(f"--threads must be at least 1, got {req.threads}")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    vin.parse_batch_sizes(req.batch_sizes)
    plans = []
    for src in req.sources:
        ckpt, manifest = checkpoint_manifest(src, req.framework, req.model)
        spec = get_model(manifest["model"])
        fw = manifest["framework"]
        if fw not in EXPORT_HOPS:
            raise UserError(f"{src}: no exporter for framework {fw!r}")
        require(fw)
        if fw not in spec.builders:
            raise UserError(f"{src}: model {spec.name!r} has no {fw} implementation")
        if opts.format == "mindir" and fw != "mindspore":
            raise UserError(f"--format mindir: only MindSpore checkpoints export MindIR ({src} "
                            f"is {fw})")
        if opts.exporter == "dynamo" and fw != "pytorch":
            raise UserError("--exporter dynamo applies to PyTorch checkpoints only")
        if opts.exporter == "dynamo" and not is_installed("onnxscript"):
            raise UserError("--exporter dynamo needs onnxscript: pip install onnxscript "
                            "(or use the default TorchScript exporter)")
        out = Path(req.out) if req.out else ckpt.parent / f"model.{opts.format}"
        check_can_create(out)
        plans.append(_Plan(Path(src), ckpt, manifest, out))
    if req.json_path:
        check_can_create(req.json_path)
    ResultStore(req.db).check_writable()
    return plans


def export(req: ExportRequest, progress: Callable[[str], None] = _progress) -> list[dict[str, Any]]:
    """Export and verify each checkpoint; one ``convert`` record each.

    Raises UserError for bad input (including what the export cell finds
    unsatisfiable, such as a checkpoint that does not match its model);
    run-time failures and verdicts over tolerance are records.
    """
    plans = plan(req)
    run_id = new_run_id()
    results, usage_errors = [], []
    for i, p in enumerate(plans, 1):
        fw, model = p.manifest["framework"], p.manifest["model"]
        try:
            record = _export_one(req, p, run_id)
        except UserError as exc:            # e.g. the checkpoint does not match its model
            usage_errors.append(str(exc))
            continue
        results.append(record)
        # Reported when done, so that bad input stays the one line the CLI prints.
        progress(f"[{i}/{len(plans)}] {model} {fw} -> {req.options.format} {p.out}: "
                 f"{record['status'].upper()}: {record.get('error') or _ok_line(record)}")
    if req.json_path:
        write_json(req.json_path, results)
    if usage_errors:
        raise UserError("; ".join(usage_errors))
    return results


def _ok_line(record: dict[str, Any]) -> str:
    v = record["metrics"].get("verdict") or {}
    return v.get("message", "")


def _export_one(req: ExportRequest, p: _Plan, run_id: str) -> dict[str, Any]:
    from dlbench.harness.launcher import run_cell

    opts = req.options
    fw, model = p.manifest["framework"], p.manifest["model"]
    batch_sizes = (vin.parse_batch_sizes(req.batch_sizes) if opts.dynamic_batch
                   else (opts.batch_size,))
    threads = ThreadConfig.default(req.threads)
    env = cell_environment(threads)
    source_sha = onnx_io.sha256(p.checkpoint)
    hop = f"{fw}->{opts.format}"
    identity = {"hop": hop, "model": model, "source_sha256": source_sha,
                "options": opts.to_dict(), "batch_sizes": list(batch_sizes), "seed": req.seed}
    record = records.new_record("convert", run_id=run_id, identity=identity, started=now_iso(),
                                argv=req.argv, env=env)
    record.update({"model": model, "framework": fw,
                   "framework_version": p.manifest.get("framework_version"),
                   "backend": opts.format, "precision": "fp32",
                   "batch_size": None if opts.dynamic_batch else opts.batch_size,
                   "intra_op_threads": threads.intra_op, "inter_op_threads": threads.inter_op})
    record["context"].update({
        "hop": hop, "options": opts.to_dict(),
        "source": {"path": str(p.checkpoint.resolve()), "sha256": source_sha,
                   "manifest": str(p.source)},
        "artifact": {"path": str(p.out.resolve()), "format": opts.format}})
    start = time.perf_counter()
    inputs = vin.inputs_for_model(model, batch_sizes, req.seed)
    p.out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{p.out.name}.", suffix=".partial",
                                  dir=p.out.parent)).resolve()
    try:
        raw = stage / f"raw.{opts.format}"
        payload = {"framework": fw, "model": model, "checkpoint": str(p.checkpoint.resolve()),
                   "threads": [threads.intra_op, threads.inter_op],
                   "inputs": str(stage / "inputs.npz"), "reference_out": str(stage / "ref.npz"),
                   "export": {"out": str(raw.resolve()), "options": opts.to_dict()}}
        if opts.format == "mindir":
            payload.update(candidate_out=str(stage / "cand.npz"), mindir=str(raw.resolve()))
        vin.save_batches(stage / "inputs.npz", inputs)
        outcome = run_cell("export", payload, env=env, timeout=req.timeout)
        if outcome.status == "usage_error":
            raise UserError(outcome.error)
        result = outcome.result
        record["metrics"].update({"cell_wall_s": outcome.wall_s, "peak_rss_mb": outcome.peak_rss_mb})
        record["peak_rss_mb"] = outcome.peak_rss_mb
        if not outcome.ok:
            record["context"].update(traceback=outcome.traceback, log_tail=outcome.log_tail)
            return _stored(req, records.finish(record, None, error=outcome.error), None, start)
        record["context"]["export"] = result.get("export")
        record["context"]["versions"] = result.get("versions")
        record["backend_version"] = _tool_version(fw, result.get("versions") or {})
        final = stage / p.out.name
        post_start = time.perf_counter()
        try:
            if opts.format == "onnx":
                summary, ir = _finish_onnx(raw, final, model=model, framework=fw, hop=hop,
                                           source=p.checkpoint, source_sha=source_sha,
                                           dynamic_batch=opts.dynamic_batch)
                record["context"]["onnx"] = {**summary.to_dict(), "ir_version_written": ir[0]}
                record["metrics"].update(node_count=summary.node_count, op_counts=summary.op_counts)
            else:
                raw.replace(final)
                onnx_io.publish_mode(final)
        except UserError as exc:            # the exporter wrote something unusable
            return _stored(req, records.finish(record, None, error=str(exc)), None, start)
        post_s = time.perf_counter() - post_start
        verify_start = time.perf_counter()
        reference = vin.load_outputs(stage / "ref.npz")
        try:
            candidate, cand_info = (
                runners.outputs(ArtifactRef(str(final), ONNX, model, fw), inputs, threads=threads)
                if opts.format == "onnx" else (vin.load_outputs(stage / "cand.npz"),
                                               result.get("candidate_run")))
        except UserError as exc:
            return _stored(req, records.finish(record, None, error=str(exc)), None, start)
        record["context"]["math_mode"] = mathmode.of_runs(
            reference=result.get("reference_run"), candidate=cand_info)
        verdict = cmp.compare(reference, candidate, cmp.tolerance("fp32"), batch_sizes,
                                 req.seed)
        verify_s = time.perf_counter() - verify_start + result.get("reference_s", 0.0) \
            + result.get("candidate_s", 0.0)
        final.replace(p.out)
        sha = onnx_io.sha256(p.out)
        record["context"]["artifact"]["sha256"] = sha
        record["metrics"].update({
            "export_s": result.get("convert_s"), "postprocess_s": post_s,
            "convert_s": (result.get("convert_s") or 0.0) + post_s, "verify_s": verify_s,
            "load_s": result.get("load_s"), "file_size_bytes": p.out.stat().st_size})
        artifact = records.artifact_row(p.out, sha, opts.format, "fp32", model=model,
                                        framework=fw, hop=hop, source_path=p.checkpoint,
                                        source_sha256=source_sha)
        return _stored(req, records.finish(record, verdict), artifact, start)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _stored(req, record, artifact, start) -> dict[str, Any]:
    record["duration_s"] = time.perf_counter() - start
    records.store(req.db, record, artifact)
    return record


def _tool_version(framework: str, versions: dict[str, str]) -> str | None:
    if framework == "tensorflow":
        return f"tf2onnx {versions.get('tf2onnx')}"
    key = {"pytorch": "torch"}.get(framework, framework)
    return f"{key} {versions.get(key)}" if versions.get(key) else None


def _finish_onnx(raw: Path, final: Path, *, model: str, framework: str, hop: str,
                 source: Path, source_sha: str, dynamic_batch: bool):
    """Make the exporter's file a dlbench ONNX file; return (summary, (IR written, IR kept))."""
    m = onnx_io.load(raw, label=f"the {hop} exporter's output")
    ir = onnx_io.lower_ir_version(m, raw)
    onnx_io.normalize_io(m, dynamic_batch=dynamic_batch)
    onnx_io.set_metadata(m, {"model": model, "framework": framework, "hop": hop,
                             "precision": "fp32", "source": source.name,
                             "source_sha256": source_sha, "dlbench_version": __version__})
    m = onnx_io.infer_shapes(m, raw)
    onnx_io.check_model(m, raw)
    onnx_io.save(m, final)
    return onnx_summary.summarize(m), ir
