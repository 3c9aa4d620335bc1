"""``dlbench bench`` as a Python API: validate everything, then run every cell in its own process.

Cells are the product artifact x backend x device x precision x batch size x
threads x scenario.  Everything that can be refused is refused before the
first cell starts (one line, exit 2).  Each cell runs through
``harness.launcher.run_cell`` with a per-cell timeout: a crash, an
out-of-memory kill or a hang is that cell's recorded failure and the sweep
goes on.  Each finished cell is stored at once (one SQLite transaction) and
the ``--json`` file is rewritten atomically, so an interrupted sweep leaves
complete records only, and ``--resume`` skips cells whose identity already
has a stored, non-failed record.
"""
from __future__ import annotations

import os
import signal
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from dlbench.harness import __version__, stats
from dlbench.models.atomic import check_can_create, write_json
from dlbench.harness.backends import BACKENDS, get_backend
from dlbench.harness.backends.base import MINDIR, ONNX, TRT_ENGINE, Backend, RunConfig
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.bench import peak as peak_mod
from dlbench.harness.bench.artifacts import Artifact, resolve
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.progress import Progress, read_progress
from dlbench.harness.bench.scenarios import get_scenario
from dlbench.harness.context import cell_key, command_line, new_run_id, now_iso
from dlbench.models.errors import UserError
from dlbench.harness.fingerprint import fingerprint, resource_label
from dlbench.harness.frameworks import FRAMEWORKS, distribution_version
from dlbench.harness.launcher import CellOutcome, run_cell
from dlbench.harness.results import ResultStore
from dlbench.harness.threads import ThreadConfig, in_force, physical_cores

DEVICES = ("cpu", "cuda", "ascend")
DEVICE_ALIASES = {"gpu": "cuda"}
CV_THRESHOLD = 0.10
# Formats whose precision is fixed when the artifact is made (dlbench build makes the others).
OWN_PRECISION = (ONNX, TRT_ENGINE, MINDIR)


@dataclass
class BenchRequest:
    artifacts: list[str]
    backends: list[str]
    devices: list[str] | None = None
    precisions: list[str] | None = None
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    threads: list[int] | None = None
    inter_op_threads: int | None = None
    scenarios: list[str] = field(default_factory=lambda: ["offline"])
    rule: StopRule = field(default_factory=StopRule)
    repeats: int = 1
    cv_threshold: float = CV_THRESHOLD
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    int_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    device_id: int = 0
    seed: int = 0
    qps: list[float] | None = None
    max_wait_ms: float = 2.0
    latency_bound_ms: float | None = None
    model: str | None = None
    timeout: float | None = None
    resume: bool = False
    # Resume within one run only (``dlbench run --resume``): skip the cells this run
    # id already stored, whatever their outcome, and nothing measured by other runs.
    resume_run: str | None = None
    db: str | None = None
    json_path: str | None = None
    argv: list[str] | None = None


@dataclass
class Cell:
    artifact: Artifact
    backend: Backend
    device: str
    precision: str
    batch_size: int
    scenario: str
    intra_op: int
    inter_op: int
    options: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]
    int_ranges: dict[str, tuple[int, int]]
    gflops: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return (f"{self.artifact.ref.model} on {self.backend.name} {self.device} {self.precision} "
                f"batch {self.batch_size} {self.scenario} ({self.intra_op} threads)")


def _split(values, kind=str) -> list:
    out = []
    for v in values or []:
        for part in str(v).split(","):
            if part.strip():
                try:
                    out.append(kind(part.strip()))
                except ValueError:
                    raise UserError(f"{part.strip()!r} is not a valid {kind.__name__}") from None
    return list(dict.fromkeys(out))


def _device_reason(backend: Backend, device: str) -> str:
    fp = fingerprint()
    if device == "cuda" and not fp["gpus"]:
        return "no NVIDIA GPU on this machine (nvidia-smi found none)"
    if device == "ascend" and not fp["ascend"]:
        return "no Ascend NPU on this machine (no /dev/davinci*)"
    devices = backend.availability().devices
    extra = {"onnxruntime": " (needs onnxruntime-gpu)",
             "pytorch": " (this PyTorch is a CPU build)"}.get(backend.name, "")
    return f"{backend.name} runs on {', '.join(devices) or 'nothing here'}{extra}"


def _backends(req: BenchRequest, artifacts: list[Artifact]) -> tuple[list[Backend], list[str]]:
    names = _split(req.backends)
    if not names:
        raise UserError("no backend given (--backend NAME, or 'all' for every available one)")
    notes: list[str] = []
    if names == ["all"]:
        formats = {a.format for a in artifacts}
        chosen = []
        for name in BACKENDS:
            b = get_backend(name)
            if not formats & set(b.formats):
                continue
            a = b.availability()
            if a.available:
                chosen.append(b)
            else:
                notes.append(f"backend {name} skipped: {a.reason}")
        if not chosen:
            raise UserError("no available backend takes these artifacts; see 'dlbench backends'")
        return chosen, notes
    chosen = [get_backend(n) for n in names]
    for b in chosen:
        a = b.availability()
        if not a.available:
            raise UserError(f"backend {b.name} is not available here: {a.reason}")
    return chosen, notes


def _precision(art: Artifact, backend: Backend, device: str, asked: str) -> str:
    if art.format in OWN_PRECISION:
        own = art.precision or "fp32"
        if asked not in ("auto", own):
            raise UserError(f"{art.label} is an {own} model and {backend.name} runs a model in its "
                            f"own precision: make an {asked} model first (dlbench build "
                            f"--precision {asked}) or drop --precision")
        return own
    allowed = backend.precisions(device)
    if asked == "auto":
        return "fp32"
    if asked not in allowed:
        raise UserError(f"--precision {asked}: {backend.name} on {device} runs "
                        f"{', '.join(p for p in allowed if p != 'auto')}")
    return asked


def _flops(art: Artifact, shapes_for_batch: dict[str, tuple[int, ...]] | None,
           batch: int) -> dict[str, Any] | None:
    if art.onnx_model is not None and shapes_for_batch is not None:
        from dlbench.harness.bench import flops
        try:
            return {**flops.count(art.onnx_model, shapes_for_batch, batch), "source": "onnx graph"}
        except Exception as exc:  # noqa: BLE001 - a count we cannot make is a note, not a failure
            return {"gflops_per_sample": None, "error": f"{type(exc).__name__}: {exc}"}
    if art.format not in OWN_PRECISION:
        from dlbench.models.registry import get_model
        spec = get_model(art.ref.model)
        return {"gflops_per_sample": spec.gflops_per_sample, "source": "zoo analytic count "
                "(convolutions, dense layers, recurrent cells, attention products)"}
    return None


def validate(req: BenchRequest) -> tuple[list[Cell], list[str]]:
    """Every cell of the sweep, or a UserError; plus notes for the user."""
    req.rule.validate()
    if not req.artifacts:
        raise UserError("no artifact given")
    batch_sizes = req.batch_sizes
    if not batch_sizes:
        raise UserError("--batch-sizes: give at least one batch size")
    for b in batch_sizes:
        if b < 1:
            raise UserError(f"--batch-sizes must be positive integers, got {b}")
    threads = req.threads or [physical_cores()]
    for t in threads:
        if t < 1:
            raise UserError(f"--threads must be at least 1, got {t}")
    inter = req.inter_op_threads or 1
    for flag, value, low in (("--inter-op-threads", inter, 1), ("--repeats", req.repeats, 1),
                             ("--device-id", req.device_id, 0)):
        if value < low:
            raise UserError(f"{flag} must be at least {low}, got {value}")
    if req.timeout is not None and req.timeout <= 0:
        raise UserError("--timeout must be positive")
    if req.cv_threshold <= 0:
        raise UserError("--cv-threshold must be positive")
    if req.max_wait_ms < 0:
        raise UserError("--max-wait-ms must not be negative")
    if req.latency_bound_ms is not None and req.latency_bound_ms <= 0:
        raise UserError("--latency-bound-ms must be positive")
    for q in req.qps or []:
        if q <= 0:
            raise UserError(f"--qps must be positive, got {q:g}")
    scenarios = req.scenarios or ["offline"]
    for s in scenarios:
        get_scenario(s)
    if (req.qps or req.latency_bound_ms is not None) and "server" not in scenarios:
        raise UserError("--qps and --latency-bound-ms apply to --scenario server")

    artifacts = [resolve(a, req.model) for a in req.artifacts]
    backends, notes = _backends(req, artifacts)
    for art in artifacts:
        notes += art.notes
        if not any(art.format in b.formats for b in backends):
            raise UserError(f"{art.label} is a {art.format} artifact; none of "
                            f"{', '.join(b.name for b in backends)} takes one "
                            f"({'; '.join(f'{b.name}: ' + ', '.join(b.formats) for b in backends)})")
    for b in backends:
        if not any(a.format in b.formats for a in artifacts):
            raise UserError(f"backend {b.name} takes {', '.join(b.formats)}; none of the "
                            f"artifacts is one")
    for key in req.options:
        if not any(b.option(key) for b in backends):
            offered = "; ".join(f"{b.name}: {', '.join(o.name for o in b.options) or 'none'}"
                                for b in backends)
            raise UserError(f"option {key!r} applies to none of the backends ({offered})")
    for name in list(req.shapes) + list(req.int_ranges):
        if not any(a.signature is None or name in [t.name for t in a.signature]
                   for a in artifacts):
            flag = "--shape" if name in req.shapes else "--int-range"
            inputs = sorted({t.name for a in artifacts for t in a.signature or []})
            raise UserError(f"{flag} {name}: no artifact has an input {name!r}; inputs: "
                            f"{', '.join(inputs)}")

    auto = _split(req.backends) == ["all"]
    devices_asked = [DEVICE_ALIASES.get(d, d) for d in _split(req.devices)]
    for d in devices_asked:
        if d not in DEVICES:
            raise UserError(f"--device must be one of {', '.join(DEVICES)}, got {d!r}")
    precisions_asked = _split(req.precisions) or ["auto"]

    cells: list[Cell] = []
    for art in artifacts:
        names = {t.name for t in art.signature} if art.signature else None
        shapes = {k: v for k, v in req.shapes.items() if names is None or k in names}
        # The user's --shape, or the zoo model's own sizes (and a note in each record).
        shape_notes = [art.default_shapes_note] if not shapes and art.default_shapes else []
        shapes = shapes or dict(art.default_shapes)
        ranges = {k: v for k, v in req.int_ranges.items() if names is None or k in names}
        sizes_by_scenario = {}
        for s in scenarios:
            sizes = get_scenario(s).batch_sizes(batch_sizes)
            fixed = inputs_mod.fixed_batch(art.signature) if art.signature else None
            if fixed is not None and sizes != [fixed]:
                notes.append(f"{art.label}: the model's batch dimension is fixed at {fixed}; "
                             f"running batch {fixed} only (asked for "
                             f"{', '.join(map(str, sizes))})")
                sizes = [fixed]
            sizes_by_scenario[s] = sizes
        gflops = None
        if art.signature is not None:
            try:
                plans = {b: inputs_mod.plan(art.signature, b, shapes, ranges, art.graph_ranges)
                         for s in scenarios for b in sizes_by_scenario[s]}
            except UserError as exc:
                raise UserError(f"{art.label}: {exc}") from None
            first = min(plans)
            gflops = _flops(art, {i.name: i.shape for i in plans[first].inputs}, first)
        elif art.format not in OWN_PRECISION:
            gflops = _flops(art, None, 1)
        for backend in backends:
            if art.format not in backend.formats:
                continue
            options = backend.resolve_options(req.options)
            if art.format == TRT_ENGINE:
                from dlbench.harness.backends.tensorrt import check_engine_here
                check_engine_here(art.ref.path)
            devices = devices_asked or [backend.default_device()]
            for device in devices:
                if device not in backend.availability().devices:
                    if auto:
                        notes.append(f"backend {backend.name} skipped on {device}: "
                                     f"{_device_reason(backend, device)}")
                        continue
                    raise UserError(f"--device {device}: {_device_reason(backend, device)}")
                for asked in precisions_asked:
                    precision = _precision(art, backend, device, asked)
                    for s in scenarios:
                        for b in sizes_by_scenario[s]:
                            for t in threads:
                                cells.append(Cell(art, backend, device, precision, b, s, t, inter,
                                                  options, shapes, ranges, gflops,
                                                  list(shape_notes)))
    if not cells:
        raise UserError("nothing to run: no backend can take these artifacts on these devices")
    unique = {}
    for c in cells:
        unique.setdefault(_identity_key(c, req), c)
    return list(unique.values()), notes


def _server_params(req: BenchRequest) -> dict[str, Any]:
    return {"qps": req.qps, "max_wait_ms": req.max_wait_ms,
            "latency_bound_ms": req.latency_bound_ms}


def identity(c: Cell, req: BenchRequest, machine_id: str) -> dict[str, Any]:
    ident = {"artifact": {k: v for k, v in c.artifact.identity().items() if k != "path"},
             "backend": c.backend.name, "device": c.device, "device_id": req.device_id,
             "precision": c.precision, "batch_size": c.batch_size, "scenario": c.scenario,
             "threads": [c.intra_op, c.inter_op], "options": c.options,
             "rule": req.rule.to_dict(), "shapes": {k: list(v) for k, v in c.shapes.items()},
             "int_ranges": {k: list(v) for k, v in c.int_ranges.items()}, "seed": req.seed,
             "repeats": req.repeats, "machine_id": machine_id}
    if c.scenario == "server":
        ident["server"] = _server_params(req)
    return ident


def _identity_key(c: Cell, req: BenchRequest) -> str:
    return cell_key("bench", identity(c, req, fingerprint()["machine_id"]))


def _payload(c: Cell, req: BenchRequest, progress_path: str) -> dict[str, Any]:
    art = c.artifact
    full_shapes = {}
    if art.signature is not None:
        p = inputs_mod.plan(art.signature, c.batch_size, c.shapes, c.int_ranges,
                            art.graph_ranges)
        full_shapes = {i.name: list(i.shape) for i in p.inputs}
    run = RunConfig(device=c.device, precision=c.precision, intra_op_threads=c.intra_op,
                    inter_op_threads=c.inter_op, device_id=req.device_id, options=dict(c.options),
                    seed=req.seed, max_batch=c.batch_size,
                    min_batch=1 if c.scenario == "server" else c.batch_size,
                    shapes=full_shapes)
    return {
        "backend": c.backend.name, "artifact": asdict(art.ref), "run": asdict(run),
        "scenario": c.scenario, "batch_size": c.batch_size, "rule": req.rule.to_dict(),
        "shapes": {k: list(v) for k, v in c.shapes.items()},
        "int_ranges": {k: list(v) for k, v in c.int_ranges.items()},
        "graph_ranges": {k: list(v) for k, v in art.graph_ranges.items()},
        "signature": ([{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)}
                       for t in art.signature] if art.signature else None),
        "scenario_params": _server_params(req) if c.scenario == "server" else {},
        "seed": req.seed, "progress_path": progress_path,
    }


def _env(c: Cell) -> dict[str, str]:
    env = ThreadConfig(c.intra_op, c.inter_op).environment()
    env.update(c.backend.environment(c.options, c.intra_op, c.inter_op))
    return env


def _kill_children() -> None:
    """End the cell we started (its own session: Ctrl-C does not reach it)."""
    for child in psutil.Process().children():
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _watch(payload: dict[str, Any], env: dict[str, str], timeout: float | None,
           bar: Progress, progress_path: str) -> CellOutcome:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["outcome"] = run_cell("bench", payload, env=env, timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
            bar.update(read_progress(progress_path))
    except BaseException:
        _kill_children()
        worker.join(10)
        raise
    if "error" in box:
        raise box["error"]
    return box["outcome"]


def run_bench(req: BenchRequest, show_progress: bool = True,
              on_record: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run the sweep; return one record per cell (failures included).

    Raises UserError for bad input — before any cell runs, or when a cell
    finds the request unsatisfiable (records finished until then are kept).
    """
    cells, notes = validate(req)
    if req.json_path:
        check_can_create(req.json_path)
    store = ResultStore(req.db)
    store.check_writable()
    fp = fingerprint()
    run_id = new_run_id()
    keys = [cell_key("bench", identity(c, req, fp["machine_id"])) for c in cells]
    if req.resume_run:
        done = store.finished_cell_keys(keys, run_id=req.resume_run)
        scope, scope_params = "run_id = ?", [req.resume_run]
    else:
        done = store.finished_cell_keys(keys) if req.resume else set()
        scope, scope_params = "status != 'failed'", []
    bar = Progress(len(cells) - len(done), enabled=show_progress)
    for n in notes:
        bar.note(f"note: {n}")
    records: list[dict[str, Any]] = []
    if done:
        bar.note(f"resuming: {len(done)} of {len(cells)} cells already in {store.path}, skipped")
        previous = {}
        for r in store.records(f"kind = 'bench' AND {scope} AND cell_key IN "
                               f"({', '.join('?' * len(done))})", scope_params + list(done)):
            previous[r["cell_key"]] = r
        records += [dict(previous[k], resumed=True) for k in keys if k in previous]
    with tempfile.TemporaryDirectory(prefix="dlbench-bench-") as tmp:
        progress_path = str(Path(tmp, "progress.json"))
        for cell, key in zip(cells, keys):
            if key in done:
                continue
            bar.start(cell.label)
            started = now_iso()
            outcomes = []
            for _ in range(req.repeats):
                Path(progress_path).unlink(missing_ok=True)
                try:
                    outcome = _watch(_payload(cell, req, progress_path), _env(cell), req.timeout,
                                     bar, progress_path)
                except BaseException:
                    bar.abandon()                 # Ctrl-C: the CLI's message gets a clean line
                    raise
                if outcome.status == "usage_error":
                    bar.abandon()
                    raise UserError(f"{cell.label}: {outcome.error}")
                outcomes.append(outcome)
                if not outcome.ok:
                    break
            record = make_record(cell, req, outcomes, fp, run_id, started, store, key)
            record["id"] = store.add(record, fp)
            records.append(record)
            if req.json_path:
                write_json(req.json_path, records)
            if on_record:
                on_record(record)
            bar.finish(_summary(record))
    if req.json_path:
        write_json(req.json_path, records)
    return records


def _summary(r: dict[str, Any]) -> str:
    if r["status"] == "failed":
        return f"FAILED: {r['error']}"
    lat = r.get("latency_ms") or {}
    text = f"{r['throughput_sps']:.4g} samples/s"
    if lat:
        text += f", p50 {lat['p50']:.3g} ms, p99 {lat['p99']:.3g} ms"
    if r["status"] == "unstable":
        text += f", UNSTABLE (cv {r['cv']:.1%})"
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
    return {"verified": row["verified"], "hop": row.get("hop"), "precision": row.get("precision"),
            "created_at": row.get("created_at"), "record_id": row.get("record_id")}


def make_record(c: Cell, req: BenchRequest, outcomes: list[CellOutcome], fp: dict[str, Any],
                run_id: str, started: str, store: ResultStore, key: str) -> dict[str, Any]:
    failed = next((o for o in outcomes if not o.ok), None)
    chosen = failed or _median_outcome(outcomes)
    result = chosen.result or {}
    metrics: dict[str, Any] = dict(result.get("metrics") or {})
    env = _env(c)
    framework = c.backend.framework or c.artifact.ref.framework
    fw = FRAMEWORKS.get(framework) if framework else None
    peak_rss = max((o.peak_rss_mb or 0) for o in outcomes) or None
    status, error = "ok", None
    if failed is not None:
        status = "failed"
        error = failed.error if failed.status != "timeout" else f"{failed.error}"
        metrics = {"peak_rss_mb": peak_rss, "cell_wall_s": sum(o.wall_s for o in outcomes)}
    else:
        thr = [o.result["metrics"]["throughput_sps"] for o in outcomes]
        if len(outcomes) > 1:
            metrics["repeats"] = [{"throughput_sps": o.result["metrics"]["throughput_sps"],
                                   "latency_p50_ms": (o.result["metrics"].get("latency_ms") or {})
                                   .get("p50"), "cv": o.result["metrics"].get("cv")}
                                  for o in outcomes]
            metrics["repeat_spread"] = {"median_sps": stats.median(thr),
                                        "mad_over_median": stats.relative_mad(thr),
                                        "min_sps": min(thr), "max_sps": max(thr)}
        metrics["throughput_sps"] = stats.median(thr)
        metrics["peak_rss_mb"] = peak_rss
        metrics["cell_wall_s"] = sum(o.wall_s for o in outcomes)
        metrics["cv_threshold"] = req.cv_threshold
        # Server latencies vary by design (queueing): the noise rule is for the loop scenarios.
        cv = metrics.get("cv") if c.scenario != "server" else None
        metrics["unstable"] = bool(cv is not None and cv > req.cv_threshold)
        if metrics["unstable"]:
            status = "unstable"
        g = (c.gflops or {}).get("gflops_per_sample")
        metrics["gflops_per_sample"] = g
        metrics["flops"] = c.gflops
        if g and metrics["throughput_sps"]:
            metrics["achieved_gflops"] = g * metrics["throughput_sps"]
            peak = peak_mod.lookup(store, fp["machine_id"], c.device, c.precision)
            if peak:
                metrics["peak_gflops"] = peak["gflops"]
                metrics["peak_record_id"] = peak["record_id"]
                metrics["percent_of_peak"] = 100 * metrics["achieved_gflops"] / peak["gflops"]
    batch = metrics.get("batch_size", c.batch_size)
    verification = _verification(store, c.artifact)
    latency = metrics.get("latency_ms")
    record = {
        "run_id": run_id, "kind": "bench", "cell_key": key, "status": status, "error": error,
        "started_at": started, "duration_s": sum(o.wall_s for o in outcomes),
        "model": c.artifact.ref.model, "framework": framework,
        "framework_version": distribution_version(fw.distribution) if fw else None,
        "backend": c.backend.name,
        "backend_version": result.get("backend_version") or c.backend.version(),
        "device": c.device, "precision": c.precision, "batch_size": batch,
        "scenario": c.scenario, "intra_op_threads": c.intra_op, "inter_op_threads": c.inter_op,
        "iterations": metrics.get("iterations"),
        "warmup_iterations": metrics.get("warmup_iterations"),
        "throughput_sps": metrics.get("throughput_sps"), "peak_rss_mb": peak_rss,
        "machine_id": fp["machine_id"], "dlbench_version": __version__,
        "git_commit": fp["git_commit"], "command_line": command_line(req.argv),
        "context": {
            "artifact": {**c.artifact.identity(), "label": c.artifact.label,
                         "meta": c.artifact.ref.meta, "verification": verification},
            "identity": identity(c, req, fp["machine_id"]),
            "timed_region": result.get("timed_region"),
            "runtime": result.get("runtime"),
            "inputs": result.get("inputs"),
            "notes": c.notes + (result.get("notes") or []) + (
                [f"{c.artifact.label} did not pass verification (dlbench verify): its outputs "
                 f"differ from its source's beyond tolerance"]
                if verification and not verification["verified"] else []) + (
                [metrics["no_feasible_rate"]] if metrics.get("no_feasible_rate") else []),
            "thread_environment": in_force(env),
            "stop_rule": req.rule.to_dict(),
            "resource": resource_label(fp, "gpu" if c.device == "cuda" else c.device),
            "options": c.options,
            "traceback": chosen.traceback if failed else None,
            "log_tail": chosen.log_tail if failed else None,
        },
        "metrics": metrics,
    }
    # Flat keys for --json readers (the contract); the database keeps them in metrics.
    record.update({
        "latency_ms": latency, "cv": metrics.get("cv"),
        "gflops_per_sample": metrics.get("gflops_per_sample", (c.gflops or {}).get(
            "gflops_per_sample")),
        "threads": {"intra_op": c.intra_op, "inter_op": c.inter_op},
        "model_path": c.artifact.ref.path,
    })
    return record
