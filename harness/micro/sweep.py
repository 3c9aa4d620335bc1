"""``dlbench micro`` as a Python API: plan op x engine x precision x threads x environment,
run each cell in its own process, store a ``micro`` record per cell.

A record's ``model`` is the op and its shape (``gemm 2048x2048x2048``), its
``backend`` and ``framework`` the engine, ``batch_size`` 1 (one call per
iteration), ``throughput_sps`` calls per second; ``metrics`` add GFLOP/s,
GB/s (the least bytes the op must move) and, for GEMM and convolution, the
share of this machine's measured GEMM peak (``dlbench env --peak``), as
bench does.  ``--with PACKAGE==VERSION`` runs a cell in a cached environment
holding that version (``harness.envs``); the record names it and its whole
package set, and ``compare --with A --with B`` pairs the two.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from dlbench.harness.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.micro import engines as engines_mod
from dlbench.harness.micro.ops import DEFAULTS, KINDS, Op, from_model, parse
from dlbench.models.errors import UserError


@dataclass
class MicroRequest:
    kind: str
    shapes: list[str] = field(default_factory=list)      # empty: the kind's defaults
    model: str | None = None                             # or the zoo network's own shapes
    batch: int = 1                                       # ... at this batch
    engines: list[str] | None = None                     # None: every installed one
    precisions: list[str] = field(default_factory=lambda: ["fp32"])
    device: str = "cpu"
    threads: list[int] | None = None                     # None: physical cores
    allocator: str = DEFAULT_ALLOCATOR
    with_specs: list[str] = field(default_factory=list)  # --with PACKAGE==VERSION, each an axis value
    rule: StopRule = field(default_factory=lambda: StopRule(min_duration_s=1.0))
    seed: int = 0
    timeout: float | None = 600
    resume: bool = False
    db: str | None = None
    json_path: str | None = None
    argv: list[str] | None = None


@dataclass(frozen=True)
class MicroCell:
    op: Op
    engine: str
    precision: str
    threads: int
    env: str = ""                 # "" the installed packages, else a --with spec

    @property
    def label(self) -> str:
        return (f"{self.op.label} {self.engine} {self.precision} {self.threads}t"
                + (f" [{self.env}]" if self.env else ""))

    def identity(self) -> dict[str, Any]:
        return {"op": self.op.label, "engine": self.engine, "precision": self.precision,
                "threads": self.threads, "with": self.env}


def ops_of(req: MicroRequest) -> list[Op]:
    if req.kind not in KINDS:
        raise UserError(f"unknown micro benchmark {req.kind!r} (choose from {', '.join(KINDS)})")
    if req.model and req.shapes:
        raise UserError("give --shape or --model, not both")
    if req.batch < 1:
        raise UserError(f"--batch must be at least 1, got {req.batch}")
    if req.model:
        return from_model(req.kind, req.model, req.batch)
    return [op for text in (req.shapes or DEFAULTS[req.kind]) for op in parse(req.kind, text)]


def plan(req: MicroRequest) -> tuple[list[MicroCell], list[str]]:
    """The cells, and notes on the combinations no engine offers (left out, said)."""
    from dlbench.harness import envs
    from dlbench.harness.frameworks import is_installed
    from dlbench.harness.threads import physical_cores

    req.rule.validate()
    ops = ops_of(req)
    envs.check_specs(req.with_specs)
    named = req.engines is not None
    names = req.engines if named else list(engines_mod.ENGINES)
    unknown = [e for e in names if e not in engines_mod.ENGINES]
    if unknown:
        raise UserError(f"unknown engine(s) {', '.join(unknown)} (choose from "
                        f"{', '.join(engines_mod.ENGINES)})")
    notes, chosen = [], []
    for name in names:
        mod = engines_mod.module(name)
        if not is_installed(mod.FRAMEWORK) and not envs.provides(req.with_specs, mod.FRAMEWORK):
            if named:
                raise UserError(f"engine {name}: {mod.FRAMEWORK} is not installed (or give "
                                f"--with {mod.FRAMEWORK}==VERSION)")
            notes.append(f"{name}: {mod.FRAMEWORK} is not installed, left out")
            continue
        if req.device not in mod.DEVICES:
            if named:
                raise UserError(f"engine {name} runs on {', '.join(mod.DEVICES)}, not "
                                f"{req.device}")
            continue
        chosen.append(name)
    bad = [p for p in req.precisions if p not in engines_mod.INPUT_DTYPES]
    if bad:
        raise UserError(f"unknown precision(s) {', '.join(bad)} (micro has "
                        f"{', '.join(engines_mod.INPUT_DTYPES)})")
    threads = req.threads or [physical_cores()]
    if min(threads) < 1:
        raise UserError("--threads must be at least 1")
    cells = []
    for name, precision in itertools.product(chosen, req.precisions):
        have = engines_mod.module(name).SUPPORTS.get(req.kind, ())
        if precision not in have:
            notes.append(f"{name} has no {precision} {req.kind} kernel"
                         + (f" (it has {', '.join(have)})" if have else "") + ": left out")
            continue
        if req.kind == "memory" and precision != "fp32":
            continue
        for op, t, env in itertools.product(ops, threads, req.with_specs or [""]):
            cells.append(MicroCell(op, name, precision, t, env))
    if not cells:
        raise UserError(f"no micro cell to run: " + ("; ".join(notes) or
                                                     "no engine runs on " + req.device))
    return cells, notes


def run_micro(req: MicroRequest, show_progress: bool = True,
              on_record: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    from dlbench.harness import envs
    from dlbench.harness.context import new_run_id, now_iso
    from dlbench.harness.fingerprint import fingerprint
    from dlbench.harness.micro.record import cell_key_of, make_record
    from dlbench.harness.progress import open_sweep
    from dlbench.harness.results import sweep_store
    from dlbench.harness.records import keep

    cells, notes = plan(req)
    store = sweep_store(req.db, req.json_path)
    fp = fingerprint()
    run_id = new_run_id()
    keys = [cell_key_of(c, req, fp) for c in cells]
    done = store.finished_cell_keys(keys) if req.resume else set()
    bar = open_sweep(len(cells), len(done), notes, "micro", store.path, show_progress)
    records = []
    for cell, key in zip(cells, keys):
        if key in done:
            continue
        bar.start(cell.label)
        started = now_iso()
        env_dir, env_error = envs.prepare(cell.env) if cell.env else (None, None)
        outcome = None if env_error else _launch(cell, req, env_dir)
        record = make_record(cell, req, outcome, env_error, fp, run_id, started, store)
        keep(record, store, fp, records, req.json_path, on_record)
        bar.finish(_summary(record))
    return records


def _launch(cell: MicroCell, req: MicroRequest, env_dir):
    from dlbench.harness import envs
    from dlbench.harness.cellenv import cell_environment
    from dlbench.harness.launcher import run_cell
    from dlbench.harness.threads import ThreadConfig

    env = cell_environment(ThreadConfig.default(cell.threads), req.allocator,
                           extra=envs.environment(env_dir) if env_dir else None)
    payload = {"op": cell.op.to_dict(), "engine": cell.engine, "precision": cell.precision,
               "device": req.device, "threads": cell.threads, "seed": req.seed,
               "rule": req.rule.to_dict(), "packages": bool(cell.env)}
    return run_cell("micro", payload, env=env, timeout=req.timeout), env


def _summary(r: dict[str, Any]) -> str:
    from dlbench.harness.micro.table import first_line

    if r["status"] == "failed":
        return "FAILED: " + first_line(r["error"])
    m = r["metrics"]
    text = f"{m['gflops']:.4g} GFLOP/s" if m.get("gflops") else f"{m['gbps']:.4g} GB/s"
    if m.get("percent_of_peak") is not None:
        text += f" ({m['percent_of_peak']:.0f}% of peak)"
    return text + (", UNSTABLE" if r["status"] == "unstable" else "")
