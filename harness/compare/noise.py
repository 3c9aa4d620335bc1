"""The noise floor: how far apart two fresh processes of the same cell land on this machine.

A change smaller than that is no change, however narrow its bootstrap
interval.  ``calibrate`` measures it through the real bench path (one cell,
k fresh processes: ``dlbench bench --repeats k``) and stores it as a
``noise_floor`` record of the machine.  ``floor_for`` gives a comparison its
floor: ``--min-effect`` when given, else the stored floor of the machine the
records were measured on, else ``DEFAULT_FLOOR``.

The floor is (max - min) / median of the k per-process throughputs: the
largest difference between two runs of an identical cell, which is exactly
what a "faster" or "slower" verdict must rise above.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.atomic import scratch
from dlbench.core.errors import UserError
from dlbench.harness import stats
from dlbench.harness.bench.measure import StopRule

# Without a calibration: separate processes of a tiny model's cell differed by 1-2 % on
# this project's quiet 2-core machine (two back-to-back runs, ratio 0.983).
DEFAULT_FLOOR = 0.02
STATISTIC = "(max - min) / median of per-process throughput"
MIN_PROCESSES = 3
BUILTIN = "built-in"


@dataclass(frozen=True)
class NoiseFloor:
    value: float  # a fraction: 0.017 is 1.7 %
    source: str  # "measured", "--min-effect" or "default"
    measured_at: str | None = None
    processes: int | None = None
    machine_id: str | None = None
    record_id: int | None = None

    def describe(self) -> str:
        text = f"noise floor {self.value * 100:.1f} %"
        if self.source == "measured":
            return f"{text} (measured {(self.measured_at or '')[:10]} over {self.processes} processes)"
        if self.source == "--min-effect":
            return f"{text} (--min-effect)"
        return (
            f"{text} (default: no floor measured on this machine at these thread "
            f"counts; dlbench compare --calibrate --threads N measures it)"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_record(record: dict[str, Any]) -> NoiseFloor:
    m = record["metrics"]
    return NoiseFloor(
        float(m["noise_floor"]),
        "measured",
        record.get("started_at"),
        m.get("processes"),
        record.get("machine_id"),
        record.get("id"),
    )


def floor_for(
    store, records: Iterable[dict[str, Any]], min_effect_percent: float | None = None
) -> NoiseFloor:
    """The floor a comparison uses: per machine and intra-op thread count of the compared
    records, the newest floor measured there (on a 2-core machine one thread's floor was
    7 % and two threads' 35 %: processes sharing every core land far apart), and the
    largest of those.  A pair of machine and thread count without a floor: the default."""
    if min_effect_percent is not None:
        return NoiseFloor(min_effect_percent / 100, "--min-effect")
    where = sorted(
        {(r.get("machine_id"), r.get("intra_op_threads")) for r in records if r.get("machine_id")}, key=str
    )
    stored = [store.noise_floor(m, t) for m, t in where]
    if where and all(stored):
        return max((from_record(r) for r in stored), key=lambda f: f.value)
    return NoiseFloor(DEFAULT_FLOOR, "default")


@dataclass
class Calibration:
    """What ``dlbench compare --calibrate`` measures: one cell, in ``processes`` processes."""

    artifact: str | None = None  # None: the built-in model
    backend: str = "onnxruntime"
    batch_size: int = 8
    threads: int | None = None
    processes: int = 5
    rule: StopRule = field(default_factory=StopRule)
    db: str | None = None
    timeout: float | None = None
    argv: list[str] | None = None

    def check(self) -> None:
        if self.processes < MIN_PROCESSES:
            raise UserError(
                f"--processes must be at least {MIN_PROCESSES} (a spread needs them), got {self.processes}"
            )
        if self.batch_size < 1:
            raise UserError(f"--batch-size must be at least 1, not {self.batch_size}")


def builtin_model(path: Path) -> str:
    """A small MLP (two 512x512 Gemm + Relu): enough work per iteration that the clock and
    Python around it are not what the spread measures, small enough to take seconds."""
    from dlbench.harness.machine.frameworks import is_installed

    if not (is_installed("onnx") and is_installed("onnxruntime")):
        raise UserError(
            "--calibrate without an ARTIFACT runs a built-in ONNX model: install "
            "onnx and onnxruntime (pip install 'dlbench[onnx]'), or name an artifact"
        )
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    width = 512
    inits, nodes, x = [], [], "x"
    for i in range(2):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits += [
            numpy_helper.from_array(w, f"w{i}"),
            numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}"),
        ]
        nodes += [
            helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"h{i}"]),
            helper.make_node("Relu", [f"h{i}"], [f"y{i}"]),
        ]
        x = f"y{i}"
    graph = helper.make_graph(
        nodes,
        "dlbench_calibration",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def calibrate(
    cal: Calibration, show_progress: bool = False
) -> tuple[NoiseFloor | None, dict[str, Any], dict[str, Any] | None]:
    """(floor, the bench record, the stored noise_floor record); the floor and its record
    are None when the cell failed (the bench record says why)."""
    from dlbench.harness.bench.execute import run_bench
    from dlbench.harness.bench.request import BenchRequest
    from dlbench.harness.machine.fingerprint import fingerprint
    from dlbench.harness.store import records
    from dlbench.harness.store.results import ResultStore

    cal.check()
    with scratch("dlbench-calibrate") as tmp:
        artifact = cal.artifact or builtin_model(Path(tmp) / "dlbench-calibration.onnx")
        req = BenchRequest(
            artifacts=[artifact],
            backends=[cal.backend],
            batch_sizes=[cal.batch_size],
            threads=[cal.threads] if cal.threads else None,
            rule=cal.rule,
            repeats=cal.processes,
            db=cal.db,
            timeout=cal.timeout,
            argv=cal.argv,
        )
        bench = run_bench(req, show_progress=show_progress)
    if len(bench) != 1:
        raise UserError(f"--calibrate measures one cell; {artifact} on {cal.backend} makes {len(bench)}")
    rec = bench[0]
    if rec["status"] == "failed":
        return None, rec, None
    thr = [r["throughput_sps"] for r in rec["metrics"]["repeats"]]
    value = stats.range_over_median(thr)
    fp = fingerprint()
    identity = {"started_at": rec["started_at"], "bench_record_id": rec["id"]}
    floor_rec = records.new_record(
        "noise_floor",
        run_id=rec["run_id"],
        identity=identity,
        started=rec["started_at"],
        argv=cal.argv,
        device=rec["device"],
        fp=fp,
        status="ok",
        duration_s=rec.get("duration_s"),
        **{
            k: rec.get(k)
            for k in (
                "model",
                "framework",
                "backend",
                "backend_version",
                "precision",
                "batch_size",
                "scenario",
                "intra_op_threads",
                "inter_op_threads",
                "iterations",
                "warmup_iterations",
                "throughput_sps",
            )
        },
        metrics={
            "noise_floor": value,
            "statistic": STATISTIC,
            "processes": len(thr),
            "throughputs_sps": thr,
            "mad_over_median": stats.relative_mad(thr),
            "bench_record_id": rec["id"],
            "bench_status": rec["status"],
        },
    )
    floor_rec["context"].update(
        {
            "artifact": (rec.get("context") or {}).get("artifact"),
            "builtin_model": cal.artifact is None,
            "stop_rule": cal.rule.to_dict(),
        }
    )
    floor_rec["id"] = ResultStore(cal.db).add(floor_rec, fp)
    return from_record(floor_rec), rec, floor_rec
