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

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io, onnx_ir, onnx_summary
from dlbench.core.atomic import stage_beside, write_json
from dlbench.core.errors import UserError
from dlbench.core.tensors import fixed_batch, follow_batch
from dlbench.core.version import __version__
from dlbench.harness.backends.base import ArtifactRef
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.convert.export_cell import ExportPayload
from dlbench.harness.convert.export_plan import Plan, plan
from dlbench.harness.convert.request import ExportRequest
from dlbench.harness.formats import ONNX
from dlbench.harness.store import records
from dlbench.harness.store.context import new_run_id, now_iso
from dlbench.harness.verify import compare as cmp
from dlbench.harness.verify import inputs as vin
from dlbench.harness.verify import run as runners


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _user_inputs(req: ExportRequest, art, batch_sizes) -> list[tuple]:
    """Verification batches from the user's model's own signature (bench's input rules)."""
    from dlbench.harness.bench import inputs as inputs_mod
    from dlbench.harness.bench.given import read_all

    given = read_all(req.inputs)  # each --input file read once, for every batch size
    shapes = art.shapes_for(req.shapes, given)
    batches = []
    for b in batch_sizes:
        try:
            plan_b = inputs_mod.plan(art.signature, b, shapes, None, art.graph_ranges, given)
        except UserError as exc:
            raise UserError(f"{art.label}: {exc}") from None
        batches.append(tuple(inputs_mod.synthesize(plan_b, req.seed).values()))
    return batches


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
        except UserError as exc:  # e.g. the checkpoint does not match its model
            usage_errors.append(str(exc))
            continue
        results.append(record)
        # Reported when done, so that bad input stays the one line the CLI prints.
        progress(
            f"[{i}/{len(plans)}] {model} {fw} -> {req.options.format} {p.out}: "
            f"{record['status'].upper()}: {record.get('error') or _ok_line(record)}"
        )
    if req.json_path:
        write_json(req.json_path, results)
    if usage_errors:
        raise UserError("; ".join(usage_errors))
    return results


def _ok_line(record: dict[str, Any]) -> str:
    v = record["metrics"].get("verdict") or {}
    return v.get("message", "")


def _export_one(req: ExportRequest, p: Plan, run_id: str) -> dict[str, Any]:
    from dlbench.harness.cells.launcher import run_cell

    opts = req.options
    fw, model = p.manifest["framework"], p.manifest["model"]
    batch_sizes = vin.parse_batch_sizes(req.batch_sizes) if opts.dynamic_batch else (opts.batch_size,)
    art = p.artifact
    if art is not None:
        batch_sizes, _ = follow_batch(art.signature, batch_sizes, "verified")
    threads = ThreadConfig.default(req.threads)
    env = cell_environment(threads)
    source_sha = art.sha256 if art is not None else onnx_io.sha256(p.checkpoint)
    hop = f"{fw}->{opts.format}"
    identity = {
        "hop": hop,
        "model": model,
        "source_sha256": source_sha,
        "options": opts.to_dict(),
        "batch_sizes": list(batch_sizes),
        "seed": req.seed,
        **({"user": art.identity(), "canonical_names": req.canonical_names} if art is not None else {}),
    }
    record = records.new_record(
        "convert", run_id=run_id, identity=identity, started=now_iso(), argv=req.argv, env=env
    )
    record.update(
        {
            "model": model,
            "framework": fw,
            "framework_version": p.manifest.get("framework_version"),
            "backend": opts.format,
            "precision": "fp32",
            "batch_size": None if opts.dynamic_batch else opts.batch_size,
            "intra_op_threads": threads.intra_op,
            "inter_op_threads": threads.inter_op,
        }
    )
    record["context"].update(
        {
            "hop": hop,
            "options": opts.to_dict(),
            "source": {
                "path": str(p.checkpoint.resolve()) if p.checkpoint else None,
                "sha256": source_sha,
                "manifest": str(p.source),
                **(
                    {"user": art.ref.meta["source"], "signature": art.ref.meta["signature"]}
                    if art is not None
                    else {}
                ),
            },
            "artifact": {"path": str(p.out.resolve()), "format": opts.format},
        }
    )
    start = time.perf_counter()
    inputs = (
        _user_inputs(req, art, batch_sizes)
        if art is not None
        else vin.inputs_for_model(model, batch_sizes, req.seed)
    )
    p.out.parent.mkdir(parents=True, exist_ok=True)
    stage = stage_beside(p.out).resolve()
    try:
        raw = stage / f"raw.{opts.format}"
        payload = ExportPayload(
            framework=fw,
            threads=threads,
            inputs=str(stage / "inputs.npz"),
            reference_out=str(stage / "ref.npz"),
            out=str(raw.resolve()),
            options=opts,
            model=model,
            checkpoint=str(p.checkpoint.resolve()) if p.checkpoint else None,
            artifact=art.ref if art is not None else None,
            candidate_out=str(stage / "cand.npz") if opts.format == "mindir" else None,
        )
        vin.save_batches(stage / "inputs.npz", inputs)
        outcome = run_cell("export", payload.to_json(), env=env, timeout=req.timeout)
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
                summary, ir = _finish_onnx(
                    raw,
                    final,
                    model=model,
                    framework=fw,
                    hop=hop,
                    source=p.checkpoint or p.source,
                    source_sha=source_sha,
                    dynamic_batch=opts.dynamic_batch and (art is None or fixed_batch(art.signature) is None),
                    own_names=art is not None and not req.canonical_names,
                    batch=max(batch_sizes),
                    input_shapes=_shapes_used(inputs, art),
                )
                record["context"]["onnx"] = {**summary.to_dict(), "ir_version_written": ir[0]}
                record["metrics"].update(node_count=summary.node_count, op_counts=summary.op_counts)
            else:
                raw.replace(final)
                onnx_io.publish_mode(final)
        except UserError as exc:  # the exporter wrote something unusable
            return _stored(req, records.finish(record, None, error=str(exc)), None, start)
        post_s = time.perf_counter() - post_start
        verify_start = time.perf_counter()
        reference = vin.load_outputs(stage / "ref.npz")
        try:
            candidate, cand_info = (
                runners.outputs(ArtifactRef(str(final), ONNX, model, fw), inputs, threads=threads)
                if opts.format == "onnx"
                else (vin.load_outputs(stage / "cand.npz"), result.get("candidate_run"))
            )
        except UserError as exc:
            return _stored(req, records.finish(record, None, error=str(exc)), None, start)
        record["context"].update(runners.what_ran(result.get("reference_run"), cand_info))
        verdict = cmp.compare(reference, candidate, cmp.tolerance("fp32"), batch_sizes, req.seed, model=model)
        verify_s = (
            time.perf_counter()
            - verify_start
            + result.get("reference_s", 0.0)
            + result.get("candidate_s", 0.0)
        )
        final.replace(p.out)
        sha = onnx_io.sha256(p.out)
        record["context"]["artifact"]["sha256"] = sha
        if "exported_the_reference_network" in result:  # the export cell says which it exported
            record["context"]["exported_network"] = (
                "the reference's" if result["exported_the_reference_network"] else "loaded again"
            )
        record["metrics"].update(
            {
                "export_s": result.get("convert_s"),
                "postprocess_s": post_s,
                "convert_s": (result.get("convert_s") or 0.0) + post_s,
                "verify_s": verify_s,
                "load_s": result.get("load_s"),
                "file_size_bytes": p.out.stat().st_size,
            }
        )
        artifact = records.artifact_row(
            p.out,
            sha,
            opts.format,
            "fp32",
            model=model,
            framework=fw,
            hop=hop,
            source_path=p.checkpoint,
            source_sha256=source_sha,
        )
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


def _shapes_used(batches: list, art) -> dict[str, list[int]] | None:
    """A user's model's input shapes at batch 1, as its verification made them: kept in
    the ONNX metadata so build and verify size the dynamic dimensions the same way."""
    if art is None:
        return None
    first = batches[0] if isinstance(batches[0], tuple) else (batches[0],)
    return {t.name: [1, *a.shape[1:]] for t, a in zip(art.signature, first)}


def _name_batch(m, traced: int) -> None:
    """Dimension 0 of every input and output is the batch where the exporter left it
    unknown (tf2onnx mints a fresh ``unk__N`` for each, which ties nothing) or baked the
    traced batch in (MindSpore's exporter ignores dynamic axes): named so.  The verifier's
    other batch size then shows whether the graph really takes any batch."""
    from dlbench.converters.onnx_io import BATCH_DIM
    from dlbench.core.tensors import dimension

    for vi in (*m.graph.input, *m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if not len(dims):
            continue
        d = dims[0]
        baked = d.HasField("dim_value") and d.dim_value == traced
        if baked or (not d.HasField("dim_value") and dimension(d.dim_param) is None):
            d.Clear()
            d.dim_param = BATCH_DIM


def _finish_onnx(
    raw: Path,
    final: Path,
    *,
    model: str,
    framework: str,
    hop: str,
    source: Path,
    source_sha: str,
    dynamic_batch: bool,
    own_names: bool = False,
    batch: int = 1,
    input_shapes: dict[str, list[int]] | None = None,
):
    """Make the exporter's file a dlbench ONNX file; return (summary, (IR written, IR kept)).
    ``own_names``: a user's model keeps its inputs' and outputs' names (the exporter was
    given them), instead of dlbench's ``input``/``logits``."""
    m = onnx_io.load(raw, label=f"the {hop} exporter's output")
    ir = onnx_ir.lower_ir_version(m, raw)
    if not own_names:
        onnx_io.normalize_io(m, dynamic_batch=dynamic_batch)
    elif dynamic_batch:
        _name_batch(m, batch)
    onnx_io.set_metadata(
        m,
        {
            "model": model,
            "framework": framework,
            "hop": hop,
            "precision": "fp32",
            "source": source.name,
            "source_sha256": source_sha,
            "dlbench_version": __version__,
            **({"input_shapes": json.dumps(input_shapes)} if input_shapes else {}),
        },
    )
    m = onnx_io.infer_shapes(m, raw)
    onnx_io.check_model(m, raw)
    onnx_io.save(m, final)
    return onnx_summary.summarize(m), ir
