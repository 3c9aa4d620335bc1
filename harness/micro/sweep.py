"""``dlbench micro`` and ``dlbench layer`` as a Python API: plan op (or layer x mode) x
engine x precision x threads x environment, run each cell in its own process, store a
``micro`` record per cell.

A record's ``model`` is the op and its shape (``gemm 2048x2048x2048``), its
``backend`` the engine (``backend_version`` the version its cell imported; the
engine is no framework's backend, so ``framework`` stays empty, and compare's
``--backend`` axis pairs engines), ``batch_size`` 1 (one call per
iteration), ``throughput_sps`` calls per second; ``metrics`` add GFLOP/s,
GB/s (the least bytes the op must move) and, for GEMM and convolution, the
share of this machine's measured GEMM peak (``dlbench env --peak``), as
bench does.  ``--with PACKAGE==VERSION`` runs a cell in a cached environment
holding that version (``harness.cells.envs``); the record names it and its whole
package set, and ``compare --with A --with B`` pairs the two.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import comma_list, field_of, flag, nested, split
from dlbench.harness.bench.measure import MEASUREMENT, StopRule
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.cells.envs import with_flag
from dlbench.harness.micro import engines as engines_mod
from dlbench.harness.micro.ops import DEFAULTS, KINDS, Op, from_model, parse
from dlbench.harness.store.context import DB, JSON_RECORDS, OUTPUT, RESUME_CELLS

PROCESSES = ("cell", "engine")


def _layer_types() -> tuple[str, ...]:
    from dlbench.harness.micro.layers import TYPES

    return tuple(TYPES)


def _modes() -> tuple[str, ...]:
    from dlbench.harness.micro.layers import MODES

    return tuple(MODES)


@dataclass
class MicroRequest:
    """What ``dlbench micro`` and ``dlbench layer`` ask for.  Each field a flag sets
    declares it (``core.flags``); the two commands word ``--shape`` and ``--engine``
    their own way (``commands.micro``)."""

    kind: str = flag("op", choices=KINDS, help="gemm, conv or memory")  # or "layer"
    shapes: list[str] = flag("--shape", factory=list, many=True, read=split)  # empty: the kind's defaults
    layer: str | None = flag(  # layer: its type (harness.micro.layers)
        "layer",
        default=None,
        choices=_layer_types,
        help="the layer type (with --shape), or a filter on --model's layers",
    )
    modes: list[str] = flag(  # layer: forward, train
        "--mode",
        factory=lambda: ["forward"],
        many=True,
        read=split,
        help=lambda: (
            f"{', '.join(_modes())}: forward, or forward + backward (input and weight gradients); "
            "repeat or comma-separate (default forward)"
        ),
    )
    model: str | None = flag(
        "--model", default=None, help="take the shapes from a zoo network's layers instead (e.g. resnet50)"
    )
    batch: int = flag("--batch", default=1, type=int, help="batch of --model's shapes (default {default})")
    engines: list[str] | None = flag(
        "--engine", "-e", default=None, many=True, read=split
    )  # None: every installed one
    precisions: list[str] = flag(
        "--precision",
        factory=lambda: ["fp32"],
        many=True,
        read=split,
        help=lambda: f"{', '.join(engines_mod.PRECISIONS)}; repeat or comma-separate (default fp32)",
    )
    device: str = flag("--device", default="cpu", help="cpu or cuda (default {default})")
    threads: list[int] | None = flag(  # None: physical cores
        "--threads",
        default=None,
        type=comma_list(int),
        help="intra-op threads, comma-separated to sweep (default: physical cores)",
    )
    allocator: str = flag(
        "--allocator", default=DEFAULT_ALLOCATOR, help="memory allocator of each cell (default {default})"
    )
    with_specs: list[str] = field_of(with_flag(), factory=list)  # --with PACKAGE==VERSION: axis values
    rule: StopRule = nested(StopRule, factory=lambda: StopRule(min_duration_s=1.0))
    seed: int = flag(
        "--seed", default=0, type=int, group=MEASUREMENT, help="seed of the operands (default {default})"
    )
    timeout: float | None = flag(
        "--timeout", default=600, type=float, group=OUTPUT, help="seconds per cell (default {default})"
    )
    process: str = flag(
        "--process",
        default="cell",
        choices=PROCESSES,
        group=OUTPUT,
        help="cell: each cell in a fresh process (isolated; the default); engine: one process per "
        "engine and setting runs its cells in turn, much faster for many small cells, but a "
        "cell then runs warm after the others and a crash or hang fails the rest of its "
        "process (the records say which)",
    )
    resume: bool = field_of(RESUME_CELLS, default=False)
    db: str | None = field_of(DB, default=None)
    json_path: str | None = field_of(JSON_RECORDS, default=None)
    argv: list[str] | None = None


@dataclass(frozen=True)
class MicroCell:
    op: Op
    engine: str
    precision: str
    threads: int
    env: str = ""  # "" the installed packages, else a --with spec
    mode: str = ""  # a layer's: forward or train

    @property
    def label(self) -> str:
        return (
            f"{self.op.label} {self.engine} {self.precision}"
            + (f" {self.mode}" if self.mode else "")
            + f" {self.threads}t"
            + (f" [{self.env}]" if self.env else "")
        )

    @property
    def group(self) -> tuple:
        """Cells that compute the same thing on different engines (a layer's outputs are
        compared within it)."""
        return (self.op, self.precision, self.mode, self.threads, self.env)

    def identity(self) -> dict[str, Any]:
        return {
            "op": self.op.label,
            "engine": self.engine,
            "precision": self.precision,
            "threads": self.threads,
            "with": self.env,
            **({"mode": self.mode} if self.mode else {}),
        }


def ops_of(req: MicroRequest) -> list[Op]:
    if req.kind not in KINDS + ("layer",):
        raise UserError(f"unknown micro benchmark {req.kind!r} (choose from {', '.join(KINDS)})")
    if req.model and req.shapes:
        raise UserError("give --shape or --model, not both")
    if req.batch < 1:
        raise UserError(f"--batch must be at least 1, got {req.batch}")
    if req.kind == "layer":
        return _layers_of(req)
    if req.model:
        return from_model(req.kind, req.model, req.batch)
    return [op for text in (req.shapes or DEFAULTS[req.kind]) for op in parse(req.kind, text)]


def _layers_of(req: MicroRequest) -> list[Op]:
    from dlbench.harness.micro import layers

    bad = [m for m in req.modes if m not in layers.MODES]
    if bad:
        raise UserError(f"unknown mode(s) {', '.join(bad)} (choose from {', '.join(layers.MODES)})")
    if req.model:
        ops = layers.from_model(req.model, req.batch)
        return [op for op in ops if op.kernel == req.layer] if req.layer else ops
    if not req.shapes:
        raise UserError("give a layer type and --shape, or --model NAME (its layers)")
    ops = []
    for text in req.shapes:
        # TYPE=SHAPE: several layer types in one sweep (and, with --process engine, in
        # one process per engine).
        typed, _, shape = text.rpartition("=")
        kind = typed or req.layer
        if kind is None:
            raise UserError(f"--shape {text}: give a layer type first, or the shape as TYPE={text}")
        if kind not in layers.TYPES:
            known = ", ".join(layers.TYPES)
            raise UserError(f"unknown layer type {kind!r} in --shape {text} (choose from {known})")
        ops.append(layers.parse(kind, shape))
    return ops


def plan(req: MicroRequest) -> tuple[list[MicroCell], list[str]]:
    """The cells, and notes on the combinations no engine offers (left out, said)."""
    from dlbench.harness.cells import envs
    from dlbench.harness.cells.threads import usable_cores
    from dlbench.harness.machine.frameworks import is_installed

    req.rule.validate()
    ops = ops_of(req)
    envs.check_specs(req.with_specs)
    layer = req.kind == "layer"
    registry = engines_mod.LAYER_ENGINES if layer else engines_mod.ENGINES
    named = req.engines is not None
    names = req.engines if named else list(registry)
    unknown = [e for e in names if e not in registry]
    if unknown:
        raise UserError(f"unknown engine(s) {', '.join(unknown)} (choose from {', '.join(registry)})")
    notes, chosen = [], []
    for name in names:
        mod = engines_mod.module(name, layer)
        if not is_installed(mod.FRAMEWORK) and not envs.provides(req.with_specs, mod.FRAMEWORK):
            if named:
                raise UserError(
                    f"engine {name}: {mod.FRAMEWORK} is not installed (or give "
                    f"--with {mod.FRAMEWORK}==VERSION)"
                )
            notes.append(f"{name}: {mod.FRAMEWORK} is not installed, left out")
            continue
        if req.device not in mod.DEVICES:
            if named:
                raise UserError(f"engine {name} runs on {', '.join(mod.DEVICES)}, not {req.device}")
            continue
        chosen.append(name)
    bad = [p for p in req.precisions if p not in engines_mod.PRECISIONS]
    if bad:
        raise UserError(
            f"unknown precision(s) {', '.join(bad)} (micro has {', '.join(engines_mod.PRECISIONS)})"
        )
    threads = req.threads or [usable_cores()]
    if min(threads) < 1:
        raise UserError("--threads must be at least 1")
    cells = []
    modes = req.modes if layer else [""]
    # Cells of one group side by side, engines in the order given: the first engine's
    # layer outputs are the reference the others are compared with.
    for op, mode, precision, t, env in itertools.product(
        ops, modes, req.precisions, threads, req.with_specs or [""]
    ):
        for name in chosen:
            what = f"{mode} layer" if layer else f"{req.kind} kernel"
            mod = engines_mod.module(name, layer)
            have = engines_mod.supports(mod, mode if layer else req.kind, req.device)
            if precision not in have:
                why = getattr(mod, "WHY_NOT", {}).get(precision)
                note = (
                    f"{name} has no {precision} {what}"
                    + (f" (it has {', '.join(have)})" if have else "")
                    + (f": {why}" if why else "")
                    + ": left out"
                )
                notes += [note] if note not in notes else []
                continue
            cells.append(MicroCell(op, name, precision, t, env, mode))
    if not cells:
        raise UserError("no micro cell to run: " + ("; ".join(notes) or "no engine runs on " + req.device))
    return cells, notes


def run_micro(
    req: MicroRequest, show_progress: bool = True, on_record: Callable[[dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    from dlbench.harness.cells import envs
    from dlbench.harness.machine.fingerprint import fingerprint
    from dlbench.harness.micro.record import agree, cell_key_of, make_record, resumed_reference
    from dlbench.harness.output.progress import open_sweep
    from dlbench.harness.store.context import new_run_id, now_iso
    from dlbench.harness.store.records import keep
    from dlbench.harness.store.results import sweep_store

    cells, notes = plan(req)
    store = sweep_store(req.db, req.json_path)
    fp = fingerprint()
    run_id = new_run_id()
    keys = [cell_key_of(c, req, fp) for c in cells]
    done = store.finished_cell_keys(keys) if req.resume else set()
    bar = open_sweep(len(cells), len(done), notes, "micro", store.path, show_progress)
    records: list[dict[str, Any]] = []
    references: dict[tuple, dict[str, Any]] = {}
    shared: dict[MicroCell, tuple] = {}  # --process engine: outcomes of cells already run
    groups: dict[tuple, list[MicroCell]] = {}  # --process engine: the cells of each process
    for cell, key in zip(cells, keys):
        if req.process == "engine" and key not in done:
            groups.setdefault(_process_of(cell), []).append(cell)
    for cell, key in zip(cells, keys):
        if key in done:
            if cell.mode:
                resumed_reference(references.setdefault(cell.group, {}), store, key)
            continue
        together = groups.get(_process_of(cell), [])
        bar.start(cell.label + (f" (+{len(together) - 1} in its process)" if len(together) > 1 else ""))
        started = now_iso()
        env_dir, env_error = envs.prepare(cell.env) if cell.env else (None, None)
        if not env_error and together and cell not in shared:
            shared.update(zip(together, _launch(together, req, env_dir)))
        launched = None if env_error else shared.pop(cell) if together else _launch([cell], req, env_dir)[0]
        record = make_record(cell, req, launched, env_error, fp, run_id, started, store)
        if cell.mode:
            agree(record, references.setdefault(cell.group, {}))
        keep(record, store, fp, records, req.json_path, on_record, only_if_absent=req.resume)
        bar.finish(_summary(record))
    return records


def _process_of(cell: MicroCell) -> tuple:
    """Cells that can share a process: one engine, and the same environment for it."""
    return (cell.engine, cell.precision, cell.threads, cell.env)


def _launch(cells: list[MicroCell], req: MicroRequest, env_dir) -> list[tuple]:
    """(each cell's outcome, the environment it was given): one cell in a process of its
    own, or several of one ``_process_of`` in one process."""
    from dlbench.harness.cells import envs
    from dlbench.harness.cells.cellenv import cell_environment
    from dlbench.harness.cells.launcher import run_cell, run_cells
    from dlbench.harness.cells.mathmode import environment as math_environment
    from dlbench.harness.cells.threads import ThreadConfig

    # The math variables as bench's cells get them (fp32 on a GPU: TF32 off before any
    # library loads), then the --with overlay.
    cell = cells[0]
    env = cell_environment(
        ThreadConfig.default(cell.threads),
        req.allocator,
        extra={
            **math_environment(req.device, cell.precision),
            **(envs.environment(env_dir) if env_dir else {}),
        },
    )
    from dlbench.harness.micro.payload import MicroPayload

    payloads = [
        MicroPayload(
            op=c.op.to_dict(),
            engine=c.engine,
            precision=c.precision,
            device=req.device,
            threads=c.threads,
            rule=req.rule,
            seed=req.seed,
            mode=c.mode,
            packages=bool(c.env),
        ).to_json()
        for c in cells
    ]
    if req.process == "cell":
        return [(run_cell("micro", payloads[0], env=env, timeout=req.timeout), env)]
    return [(o, env) for o in run_cells("micro", payloads, env=env, timeout=req.timeout)]


def _summary(r: dict[str, Any]) -> str:
    from dlbench.harness.micro.table import first_line

    if r["status"] == "failed":
        return "FAILED: " + first_line(r["error"])
    m = r["metrics"]
    text = f"{m['gflops']:.4g} GFLOP/s" if m.get("gflops") else f"{m['gbps']:.4g} GB/s"
    if m.get("percent_of_peak") is not None:
        text += f" ({m['percent_of_peak']:.0f}% of peak)"
    return text + (", UNSTABLE" if r["status"] == "unstable" else "")
