"""One bench cell's outcomes as the record the store keeps and ``--json`` prints.

A record carries its whole context (artifact and its verification, identity,
timed region, runtime, thread environment, machine), so a number read back
months later still says what it measured.  Repeats collapse to the median
outcome; any failed repeat makes the cell failed.
"""

from __future__ import annotations

from typing import Any

from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness import stats
from dlbench.harness.bench import peak_share
from dlbench.harness.bench.artifacts import Artifact
from dlbench.harness.bench.plan import Cell, identity
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cells import envs, mathmode
from dlbench.harness.cells.launcher import CellOutcome
from dlbench.harness.machine.frameworks import distribution_version
from dlbench.harness.store import records
from dlbench.harness.store.results import ResultStore


def summary(r: dict[str, Any]) -> str:
    """The one line the progress display ends a cell with."""
    if r["status"] == "failed":
        return f"FAILED: {r['error']}"
    lat = r.get("latency_ms") or {}
    text = f"{r['throughput_sps']:.4g} samples/s"
    if lat:
        text += f", p50 {lat['p50']:.3g} ms, p99 {lat['p99']:.3g} ms"
    if r["status"] == "unstable":
        text += f", UNSTABLE ({stats.describe_stability(r['metrics'].get('stability'))})"
    return text


def _median_outcome(outcomes: list[CellOutcome]) -> CellOutcome:
    ranked = sorted(outcomes, key=lambda o: o.result["metrics"]["throughput_sps"])
    return ranked[(len(ranked) - 1) // 2]


def _verification(store: ResultStore, art: Artifact) -> dict[str, Any] | None:
    """The newest verdict ``dlbench export/build/verify`` stored on this file's bytes, if any:
    a fast number from a model that computes something else is not a result."""
    if not art.sha256 or not hasattr(store, "artifact"):
        return None
    row = store.artifact(art.sha256)
    if not row:
        return None
    return {
        "verified": row["verified"],
        "hop": row.get("hop"),
        "precision": row.get("precision"),
        "created_at": row.get("created_at"),
        "record_id": row.get("record_id"),
    }


def _stability(c: Cell, req: BenchRequest, outcomes: list[CellOutcome]) -> dict[str, Any]:
    """Both noise rules (``stats.stability``): IQR / median within the processes (their
    median), and the spread of throughput between them.  Server latencies vary by design
    (queueing) and its throughput is the rate it was offered: no rule applies there."""
    if c.scenario == "server":
        return {
            **stats.stability(
                None, (), within_threshold=req.iqr_threshold, between_threshold=req.repeat_spread_threshold
            ),
            "not_judged": "server scenario: latencies include queueing by design",
        }
    within = [o.result["metrics"].get("iqr_over_median") for o in outcomes]
    within = [x for x in within if x is not None]
    return stats.stability(
        stats.median(within) if within else None,
        [o.result["metrics"]["throughput_sps"] for o in outcomes],
        within_threshold=req.iqr_threshold,
        between_threshold=req.repeat_spread_threshold,
    )


def _metrics(
    c: Cell,
    req: BenchRequest,
    outcomes: list[CellOutcome],
    failed: CellOutcome | None,
    chosen: CellOutcome,
    store: ResultStore,
    machine_id: str,
) -> dict[str, Any]:
    """The measured figures: the median repeat's, with spread, stability and share of peak."""
    peak_rss = max((o.peak_rss_mb or 0) for o in outcomes) or None
    if failed is not None:
        return {"peak_rss_mb": peak_rss, "cell_wall_s": sum(o.wall_s for o in outcomes)}
    metrics: dict[str, Any] = dict((chosen.result or {}).get("metrics") or {})
    thr = [o.result["metrics"]["throughput_sps"] for o in outcomes]
    if len(outcomes) > 1:
        metrics["repeats"] = [
            {
                "throughput_sps": o.result["metrics"]["throughput_sps"],
                "latency_p50_ms": (o.result["metrics"].get("latency_ms") or {}).get("p50"),
                "cv": o.result["metrics"].get("cv"),
                "iqr_over_median": o.result["metrics"].get("iqr_over_median"),
            }
            for o in outcomes
        ]
        metrics["repeat_spread"] = {
            "median_sps": stats.median(thr),
            "mad_over_median": stats.relative_mad(thr),
            "range_over_median": stats.range_over_median(thr),
            "min_sps": min(thr),
            "max_sps": max(thr),
        }
    metrics["throughput_sps"] = stats.median(thr)
    metrics["peak_rss_mb"] = peak_rss
    metrics["cell_wall_s"] = sum(o.wall_s for o in outcomes)
    metrics["stability"] = _stability(c, req, outcomes)
    metrics["unstable"] = metrics["stability"]["unstable"]
    g = (c.gflops or {}).get("gflops_per_sample")
    metrics["gflops_per_sample"] = g
    metrics["flops"] = c.gflops
    if g and metrics["throughput_sps"]:
        metrics["achieved_gflops"] = g * metrics["throughput_sps"]
        metrics.update(
            peak_share.share_of_peak(
                store, machine_id, c.device, c.precision, c.intra_op, metrics["achieved_gflops"]
            )
        )
    return metrics


def make_record(
    c: Cell,
    req: BenchRequest,
    outcomes: list[CellOutcome],
    fp: dict[str, Any],
    run_id: str,
    started: str,
    store: ResultStore,
    ran: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The cell's record; its key is the plan's (``plan.identity_key``: same identity).
    ``ran`` is the executor's word on where the cell ran and the environment it was given
    there (``harness.executors``): it replaces the parent's description of that environment."""
    failed = next((o for o in outcomes if not o.ok), None)
    chosen = failed or _median_outcome(outcomes)
    result = chosen.result or {}
    metrics = _metrics(c, req, outcomes, failed, chosen, store, fp["machine_id"])
    framework = c.backend.framework or c.artifact.ref.framework
    fw = FRAMEWORKS.get(framework) if framework else None
    status = "failed" if failed is not None else ("unstable" if metrics["unstable"] else "ok")
    verification = _verification(store, c.artifact)
    record = records.new_record(
        "bench",
        run_id=run_id,
        identity=identity(c, req, fp["machine_id"]),
        started=started,
        argv=req.argv,
        device=c.device,
        fp=fp,
        env=c.environment(),
        status=status,
        error=failed.error if failed is not None else None,
        duration_s=sum(o.wall_s for o in outcomes),
        model=c.artifact.ref.model,
        framework=framework,
        framework_version=distribution_version(fw.distribution) if fw else None,
        backend=c.backend.name,
        backend_version=result.get("backend_version") or c.backend.version(),
        precision=c.precision,
        batch_size=metrics.get("batch_size", c.batch_size),
        scenario=c.scenario,
        intra_op_threads=c.intra_op,
        inter_op_threads=c.inter_op,
        iterations=metrics.get("iterations"),
        warmup_iterations=metrics.get("warmup_iterations"),
        throughput_sps=metrics.get("throughput_sps"),
        peak_rss_mb=metrics["peak_rss_mb"],
        metrics=metrics,
    )
    record["context"].update(
        {
            "artifact": {
                **c.artifact.identity(),
                "label": c.artifact.label,
                "meta": c.artifact.ref.meta,
                "verification": verification,
            },
            "timed_region": result.get("timed_region"),
            "runtime": result.get("runtime"),
            "math_mode": mathmode.of(result.get("runtime")),
            "inputs": result.get("inputs"),
            **({"dims": c.dims} if c.dims else {}),  # this cell's point of a --dim sweep
            "config": req.config,
            "notes": c.notes
            + (result.get("notes") or [])
            + (
                [
                    f"{c.artifact.label} did not pass verification (dlbench verify): its outputs "
                    f"differ from its source's beyond tolerance"
                ]
                if verification and not verification["verified"]
                else []
            )
            + ([metrics["no_feasible_rate"]] if metrics.get("no_feasible_rate") else [])
            + ([metrics["peak_note"]] if metrics.get("peak_note") else []),
            "stop_rule": req.rule.to_dict(),
            "options": c.options,
            **envs.record_context(c.env, result.get("packages")),
            "traceback": chosen.traceback if failed else None,
            "log_tail": chosen.log_tail if failed else None,
            **(ran or {}),
        }
    )
    # Flat keys for --json readers (the contract); the database keeps them in metrics.
    record.update(
        {
            "latency_ms": metrics.get("latency_ms"),
            "cv": metrics.get("cv"),
            "percentile_support": metrics.get("percentile_support"),
            "gflops_per_sample": metrics.get("gflops_per_sample", (c.gflops or {}).get("gflops_per_sample")),
            "threads": {"intra_op": c.intra_op, "inter_op": c.inter_op},
            "model_path": c.artifact.ref.path,
        }
    )
    return record
