"""One micro cell's outcome as the record the store keeps: built by ``records.new_record``.

The stability rule is bench's (``stats.stability``: IQR / median of the
per-iteration times), and the share of peak is bench's
(``bench.peak_share.share_of_peak``), so a micro cell and a model cell are read the
same way.
"""

from __future__ import annotations

from typing import Any

from dlbench.harness import stats
from dlbench.harness.bench import peak_share
from dlbench.harness.cells import envs
from dlbench.harness.micro import engines
from dlbench.harness.store import records
from dlbench.harness.store.context import cell_key

TRAIN_FACTOR = 3
# Largest relative difference (max |a - b| / max |reference|) a layer's output and gradient
# may have from the reference engine's: engines pick different algorithms (Winograd,
# another summation order), so fp32 agrees to ~1e-5 typically, not bit for bit.
AGREEMENT = {"fp32": 1e-3, "bf16": 5e-2}


def resumed_reference(reference: dict[str, Any], store, key: str) -> None:
    """A skipped (resumed) cell of a layer group: the reference, if it is the group's
    first, from its stored record's sample."""
    if reference:
        return
    rows = store.records("cell_key = ? AND status != 'failed'", [key])
    if rows:
        reference.update(engine=rows[-1]["backend"], sample=(rows[-1].get("context") or {}).get("sample"))


def agree(record: dict[str, Any], reference: dict[str, Any]) -> None:
    """Compare a layer cell's output (and gradient) sample with its group's reference (the
    first engine that ran it); the first one becomes the reference.  A disagreement
    fails the cell: a fast layer that computes something else is not a result."""
    import numpy as np

    sample = (record.get("metrics") or {}).pop("sample", None)
    if record["status"] == "failed" or sample is None:
        return
    # Kept with the record: a resumed sweep that skips this cell takes its reference
    # from here, instead of letting the next engine become the reference unseen.
    record.setdefault("context", {})["sample"] = sample
    if reference.get("sample") is None and reference.get("engine"):
        record["metrics"]["agreement"] = {
            "reference": reference["engine"],
            "unchecked": (
                f"the reference cell ({reference['engine']}) was resumed from a record that "
                f"kept no output sample: run the group again without --resume to compare"
            ),
        }
        return
    if not reference:
        reference.update(engine=record["backend"], sample=sample)
        record["metrics"]["agreement"] = {"reference": record["backend"]}
        return
    ref, errors = reference["sample"], {"reference": reference["engine"]}
    for key in ("output", "grad"):
        if key in ref and key in sample:
            a, b = np.asarray(sample[key]), np.asarray(ref[key])
            if a.shape != b.shape or sample.get("shape") != ref.get("shape"):
                errors[key] = float("inf")
                continue
            errors[key] = float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) or 1.0))
    record["metrics"]["agreement"] = errors
    worst = max((v for k, v in errors.items() if k != "reference"), default=0.0)
    limit = AGREEMENT.get(record["precision"], 1e-3)
    if not worst <= limit:
        record["status"] = "failed"
        record["error"] = (
            f"{record['model']} on {record['backend']} differs from "
            f"{reference['engine']}'s: relative error {worst:.3g} > {limit:g} "
            f"(" + ", ".join(f"{k} {v:.3g}" for k, v in errors.items() if k != "reference") + ")"
        )


def identity(cell, req) -> dict[str, Any]:
    return {**cell.identity(), "device": req.device, "allocator": req.allocator}


def cell_key_of(cell, req, fp: dict[str, Any]) -> str:
    """The key ``records.new_record`` gives the cell's record (resume looks it up)."""
    return cell_key("micro", {**identity(cell, req), "machine_id": fp["machine_id"]})


def make_record(
    cell, req, launched, env_error: str | None, fp: dict[str, Any], run_id: str, started: str, store
) -> dict[str, Any]:
    outcome, env = launched if launched else (None, None)
    mod = engines.module(cell.engine, bool(cell.mode))
    result = (outcome.result or {}) if outcome is not None and outcome.ok else {}
    runtime = result.get("runtime") or {}
    m = dict(result.get("metrics") or {})
    error = env_error or (None if outcome is None or outcome.ok else outcome.error)
    op = cell.op
    if not error:
        calls = m["throughput_sps"]
        # A train call is forward + backward: about three forwards (the input's and the
        # weights' gradients each cost one), the usual convention, said in the record.
        factor = TRAIN_FACTOR if cell.mode == "train" else 1
        m["flops_per_call"] = op.flops() * factor
        m["bytes_per_call"] = op.bytes_moved(cell.precision) * factor
        m["gflops"] = m["flops_per_call"] * calls / 1e9 if op.flops() else None
        m["gbps"] = m["bytes_per_call"] * calls / 1e9
        if op.kind != "memory":
            m.update(
                peak_share.share_of_peak(
                    store, fp["machine_id"], req.device, cell.precision, cell.threads, m["gflops"]
                )
            )
        m["stability"] = stats.stability(m.get("iqr_over_median"))
        m["unstable"] = m["stability"]["unstable"]
    status = "failed" if error else ("unstable" if m["unstable"] else "ok")
    record = records.new_record(
        "micro",
        run_id=run_id,
        identity=identity(cell, req),
        started=started,
        argv=req.argv,
        device=req.device,
        fp=fp,
        env=env,
        status=status,
        error=error,
        duration_s=outcome.wall_s if outcome is not None else None,
        model=op.label,
        backend=cell.engine,
        backend_version=runtime.get("version"),
        precision=cell.precision,
        batch_size=1,
        intra_op_threads=cell.threads,
        inter_op_threads=1,
        iterations=m.get("iterations"),
        warmup_iterations=m.get("warmup_iterations"),
        throughput_sps=m.get("throughput_sps"),
        peak_rss_mb=outcome.peak_rss_mb if outcome is not None else None,
        metrics=m,
    )
    record["context"].update(
        {
            "op": op.to_dict(),
            "engine_distribution": mod.FRAMEWORK,
            "mode": cell.mode or None,
            # "engine": the cell ran in one process after others of its engine (--process).
            "process": req.process,
            **envs.record_context(cell.env, runtime.get("packages")),
            "runtime": {k: runtime.get(k) for k in ("library", "layout", "notes")},
            "math_mode": runtime.get("math_mode"),
            "stop_rule": req.rule.to_dict(),
            "notes": list(runtime.get("notes") or []) + ([m["peak_note"]] if m.get("peak_note") else []),
            "traceback": outcome.traceback if outcome is not None and not outcome.ok else None,
            "log_tail": outcome.log_tail if outcome is not None and not outcome.ok else None,
        }
    )
    return record
