"""``dlbench build`` as a Python API: fp32 ONNX -> INT8 / FP16 ONNX or a TensorRT engine, verified.

The source model is checked first (a corrupt file, an operator ONNX Runtime
lacks: exit 2 before any work), its outputs on the fixed verification inputs
are computed with ONNX Runtime (the fp32 reference), an old graph is normalized
(``converters.onnx_normalize``: initializers that are inputs frozen, opset
raised to the hop's, constants folded) and must match that reference at fp32
tolerance before the hop sees it, the hop writes the
artifact into a staging directory, the artifact runs on the same inputs (ONNX
Runtime for ONNX, the TensorRT cell for engines), and the verifier judges it
with the tolerance of the artifact's precision.  Then the file is renamed into
place and stored as verified or unverified.  A model whose batch is fixed is
verified and calibrated at that batch (the record's ``notes`` say so).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io, onnx_ir, onnx_normalize, onnx_summary
from dlbench.converters.ort_tools import kept_log_note
from dlbench.core.atomic import scratch, stage_beside, write_json
from dlbench.core.errors import UserError, first_line
from dlbench.core.version import __version__
from dlbench.harness.backends.base import ArtifactRef
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.convert import calibration
from dlbench.harness.convert.build_plan import Plan, plan
from dlbench.harness.convert.request import BuildRequest
from dlbench.harness.formats import ONNX
from dlbench.harness.store import records
from dlbench.harness.store.context import new_run_id, now_iso
from dlbench.harness.verify import compare as cmp
from dlbench.harness.verify import inputs as vin
from dlbench.harness.verify import run as runners


def build(req: BuildRequest) -> dict[str, Any]:
    """Build and verify one artifact; return its ``convert`` record."""
    from dlbench.harness.evaluate.data import heldout_images, is_calibration_set

    p = plan(req)
    threads = ThreadConfig.default(req.threads)
    env = cell_environment(threads)
    source_sha = onnx_io.sha256(p.source)
    meta = p.summary.metadata
    identity = {
        "hop": p.hop.name,
        "source_sha256": source_sha,
        "options": p.options.to_dict(),
        "batch_sizes": list(p.batch_sizes),
        "seed": req.seed,
    }
    device = p.hop.device
    record = records.new_record(
        "convert",
        run_id=new_run_id(),
        identity=identity,
        started=now_iso(),
        argv=req.argv,
        device=device,
        env=env,
    )
    fmt = p.hop.requires_backend or p.hop.artifact_format  # the records' artifact kind
    record.update(
        {
            "model": meta.get("model") or _name_of(p.source),
            "framework": meta.get("framework"),
            "notes": list(p.notes),
            "backend": fmt,
            "precision": p.precision,
            "intra_op_threads": threads.intra_op,
            "inter_op_threads": threads.inter_op,
        }
    )
    record["context"].update(
        {
            "hop": p.hop.name,
            "options": p.options.to_dict(),
            "source": {
                "path": str(p.source.resolve()),
                "sha256": source_sha,
                "precision": p.summary.precision,
                "node_count": p.summary.node_count,
            },
            "artifact": {"path": str(p.out.resolve()), "format": fmt},
        }
    )
    start = time.perf_counter()
    verify_start = time.perf_counter()
    if is_calibration_set(p.options.calib_data):
        # Calibrated on a data set's training split: judged on its held-out images,
        # which calibration never saw (synthetic images fall outside the calibrated ranges).
        inputs = heldout_images(
            p.options.calib_data, vin.image_shape_of(p.summary, str(p.source))[0], p.batch_sizes
        )
        record["context"]["verify_inputs"] = f"{p.options.calib_data}: held-out split, in order"
    else:
        inputs = vin.inputs_for_onnx(p.summary, p.batch_sizes, req.seed, str(p.source), req)
    reference, ref_info = runners.outputs(_onnx_ref(p.source, meta), inputs, threads=threads)
    reference_s = time.perf_counter() - verify_start
    p.out.parent.mkdir(parents=True, exist_ok=True)
    stage = stage_beside(p.out).resolve()
    try:
        staged = stage / p.out.name
        built_from, normalized = _normalized(p, stage, inputs, reference, threads, req.seed)
        if normalized:
            record["context"]["normalize"] = normalized
            record["notes"].append(onnx_normalize.describe(normalized))
            if not normalized["verdict"]["ok"]:
                return _stored(
                    req,
                    records.finish(
                        record,
                        None,
                        error=(
                            f"normalizing the graph ({', '.join(normalized['steps'])}) changed its "
                            f"outputs: {normalized['verdict']['message']}"
                        ),
                    ),
                    None,
                    start,
                )
        convert_start = time.perf_counter()
        candidate = None
        calib = (
            calibration.Deferred(lambda: calibration.batches(p.source, p.summary, p.options, req))
            if p.hop.calibrates(p.options)
            else None
        )
        if p.hop.in_cell:
            outcome, info, candidate = _tensorrt_cell(p, built_from, staged, inputs, calib, meta, req, env)
            if not outcome.ok:
                record["context"].update(traceback=outcome.traceback, log_tail=outcome.log_tail)
                return _stored(req, records.finish(record, None, error=outcome.error), None, start)
            sidecar = {
                **info["sidecar"],
                "model": meta.get("model"),
                "framework": meta.get("framework"),
                "source": {"path": str(p.source.resolve()), "sha256": source_sha},
                "dlbench_version": __version__,
                "created_at": now_iso(),
            }
            record["backend_version"] = f"tensorrt {sidecar['tensorrt_version']}"
            record["context"]["build"] = sidecar
            convert_s = info["build_s"]
        else:
            try:
                info = p.hop.build(
                    built_from,
                    staged,
                    p.options,
                    calibration=calib,
                    calibration_source=calibration.describe(p.options),
                )
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - a quantizer crash: the record's failure
                import traceback

                record["context"]["traceback"] = traceback.format_exc()
                return _stored(
                    req,
                    records.finish(record, None, error=f"{p.hop.name} failed: {first_line(exc)}"),
                    None,
                    start,
                )
            convert_s = time.perf_counter() - convert_start
            try:
                summary = _finish_onnx(staged, p, source_sha)
            except UserError as exc:
                return _stored(req, records.finish(record, None, error=str(exc)), None, start)
            record["context"]["onnx"] = summary.to_dict()
            record["metrics"].update(node_count=summary.node_count, op_counts=summary.op_counts)
            import onnxruntime

            record["backend_version"] = f"onnxruntime {onnxruntime.__version__}"
        record["context"]["build_info"] = {k: v for k, v in info.items() if k != "sidecar"}
        if said := kept_log_note(info.get("quantizer_log") or {}):
            record["notes"].append(said)
        verify_start = time.perf_counter()
        cand_info = info.get("candidate_run")  # the TensorRT cell's own run
        if candidate is None:
            try:
                candidate, cand_info = runners.outputs(_onnx_ref(staged, meta), inputs, threads=threads)
            except UserError as exc:
                return _stored(req, records.finish(record, None, error=str(exc)), None, start)
        record["context"].update(runners.what_ran(ref_info, cand_info))
        verdict = cmp.compare(
            reference, candidate, cmp.tolerance(p.precision), p.batch_sizes, req.seed, model=meta.get("model")
        )
        verify_s = reference_s + time.perf_counter() - verify_start + info.get("candidate_s", 0.0)
        if p.precision == "int8" and not p.hop.in_cell and not verdict.ok:
            record["metrics"]["layer_errors"] = _layer_errors(built_from, staged, inputs, threads)
        onnx_io.publish_mode(staged)
        staged.replace(p.out)
        sha = onnx_io.sha256(p.out)
        if p.hop.in_cell:
            from dlbench.converters.tensorrt_runtime import sidecar_path

            sidecar["sha256"] = sha
            sidecar["verified"] = verdict.ok
            write_json(sidecar_path(p.out), sidecar)
        record["context"]["artifact"]["sha256"] = sha
        record["metrics"].update(
            {"convert_s": convert_s, "verify_s": verify_s, "file_size_bytes": p.out.stat().st_size}
        )
        artifact = records.artifact_row(
            p.out,
            sha,
            fmt,
            p.precision,
            model=meta.get("model"),
            framework=meta.get("framework"),
            hop=p.hop.name,
            source_path=p.source,
            source_sha256=source_sha,
        )
        return _stored(req, records.finish(record, verdict), artifact, start)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _normalized(
    p: Plan, stage: Path, inputs, reference, threads: ThreadConfig, seed: int
) -> tuple[Path, dict[str, Any] | None]:
    """The graph the hop builds from: the source itself, or its normalized copy
    (``converters.onnx_normalize``: frozen, folded, opset raised), which must compute what
    the source does (fp32 tolerance, same inputs) before anything else happens to it."""
    path = stage / "normalized.onnx"
    info = onnx_normalize.normalize(p.source, path, freeze=p.options.freeze, min_opset=p.hop.min_opset)
    if info is None:
        return p.source, None
    outputs, _ = runners.outputs(_onnx_ref(path, {}), inputs, threads=threads)
    verdict = cmp.compare(
        reference, outputs, cmp.tolerance("fp32"), p.batch_sizes, seed, model=p.summary.metadata.get("model")
    )
    worst = verdict.worst
    info["verdict"] = {
        "ok": verdict.ok,
        "message": verdict.message,
        "max_abs": worst.max_abs if worst else None,
        "cosine": worst.cosine if worst else None,
    }
    return path, info


def _layer_errors(source: Path, staged: Path, inputs, threads: ThreadConfig) -> dict[str, Any]:
    """Which layers an unverified INT8 model lost its accuracy in (``verify.layers``).
    A diagnosis, not the verdict: if it cannot be made, the record says why and the
    build's outcome stands."""
    from dlbench.harness.verify.layers import layer_errors

    try:
        return layer_errors(source, staged, inputs, threads=threads.intra_op)
    except Exception as exc:  # noqa: BLE001 - any failure of the diagnosis is recorded
        return {"error": first_line(exc)}


def _onnx_ref(path: Path, meta: dict[str, str]) -> ArtifactRef:
    return ArtifactRef(
        str(Path(path).resolve()), ONNX, meta.get("model") or Path(path).stem, meta.get("framework")
    )


def _tensorrt_cell(p: Plan, source: Path, staged: Path, inputs, calib, meta, req: BuildRequest, env):
    """Build and run the engine in its own cell: (outcome, info, candidate outputs)."""
    from dlbench.harness.cells.launcher import run_cell

    with scratch("dlbench-trt") as tmp:
        payload = {
            "onnx": str(source.resolve()),
            "out": str(staged.resolve()),
            "options": p.options.to_dict(),
            "model_precision": p.summary.precision,
            "model": meta.get("model"),
            "inputs": str(Path(tmp, "inputs.npz")),
            "outputs": str(Path(tmp, "outputs.npz")),
            "scratch": str(Path(tmp).resolve()),
            "calibration": str(Path(tmp, "calibration.npz")) if calib else None,
        }
        vin.save_batches(payload["inputs"], inputs)
        if calib:
            vin.save_batches(payload["calibration"], calib)
        outcome = run_cell(req.to, payload, env=env, timeout=req.timeout)
        if outcome.status == "usage_error":
            raise UserError(outcome.error)
        if not outcome.ok:
            return outcome, None, None
        info = dict(outcome.result)
        info["cell"] = {"wall_s": outcome.wall_s, "peak_rss_mb": outcome.peak_rss_mb}
        return outcome, info, vin.load_outputs(payload["outputs"])


def _stored(req: BuildRequest, record, artifact, start) -> dict[str, Any]:
    record["duration_s"] = time.perf_counter() - start
    records.store(req.db, record, artifact)
    if req.json_path:
        write_json(req.json_path, [record])
    return record


def _name_of(source: Path) -> str:
    """A source's model name where it records none: as bench names the file, by its stem."""
    return source.stem


def _finish_onnx(path: Path, p: Plan, source_sha: str):
    """Check the hop's ONNX output, make ONNX Runtime able to read it, label it."""
    m = onnx_io.load(path, label=p.out)
    onnx_ir.lower_ir_version(m, p.out)
    meta = dict(p.summary.metadata)
    meta.update(
        {
            # The source's name (a user's file has none recorded): bench and the report
            # then name the build as they name its source.
            "model": meta.get("model") or _name_of(p.source),
            "hop": p.hop.name,
            "precision": p.precision,
            "source": p.source.name,
            "source_sha256": source_sha,
            "dlbench_version": __version__,
        }
    )
    onnx_io.set_metadata(m, meta)
    onnx_io.check_model(m, p.out)
    onnx_io.save(m, path)
    return onnx_summary.summarize(m)
