"""``dlbench tune`` as a Python API: builds, one search per backend, configs and records.

The budget covers everything: the precision builds first (a build that does not verify
is left out of the search, like a build bench would mark UNVERIFIED), then each backend
gets an equal share of what is left.  The search's cells go to a scratch database
beside the configs, not to the results database: they are short, partial measurements
whose only use is ranking; the results database gets one ``tune`` record per backend and
precision, the best throughput measured, which later bench rows are compared with.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.tune.request import TuneRequest
from dlbench.harness.tune.space import BUILD, COMMON, SOURCE, Space, applying, declared, narrowed


def _spaces(req: TuneRequest, onnx: bool) -> list[Space]:
    """Each backend's declared space, with the ``--space`` entries that apply to it."""
    from dlbench.harness.backends import get_backend

    backends = [get_backend(name) for name in req.backends]
    for b in backends:
        avail = b.availability()
        if not avail.available or req.device not in avail.devices:
            raise UserError(f"--backend {b.name} cannot run on {req.device} here: {avail.reason}")
    known = {*COMMON, *(o.name for b in backends for o in b.options)}
    for name in req.space:
        if name not in known:
            raise UserError(f"--space {name}: not a setting to tune; choose from {', '.join(sorted(known))}")
        if not any(applying({name: []}, b) for b in backends):  # inter-op threads: no pool
            raise UserError(
                f"--space {name}: {', '.join(b.name for b in backends)} has no inter-op thread pool to size"
            )
    return [
        narrowed(declared(b, req.device, req.batch_sizes, req.builds, onnx), applying(req.space, b))
        for b in backends
    ]


def _builds(req: TuneRequest, source: str, targets: set[str], out: Path, say) -> dict[str, str]:
    """build value -> file, the source and every target that built and verified."""
    from dlbench.harness.convert.builds import verified_builds

    files, _ = verified_builds(source, sorted(targets - {SOURCE}), out, say, db=req.db)
    return {SOURCE if t == "fp32" else t: f for t, f in files.items()}


def _check_target(target: str) -> None:
    """Bad input is one line before anything is written: a target bench cannot resolve
    would otherwise fail every cell of the search, each with the same sentence, and
    leave the configs folder and the database behind."""
    from dlbench.harness.bench.artifacts import resolve

    resolve(target)


def tune(req: TuneRequest, say=lambda line: None, argv: list[str] | None = None) -> dict[str, Any]:
    """Search every backend within ``req.budget_s``; write the configs; store the records.
    Returns the tables' text, the config files, the records and the searches."""
    from dlbench.core.atomic import write_text
    from dlbench.harness.machine.fingerprint import fingerprint
    from dlbench.harness.store.context import new_run_id, now_iso
    from dlbench.harness.store.results import ResultStore
    from dlbench.harness.tune.result import bench_config, config_text, run_config, tables, tune_records
    from dlbench.harness.tune.search import run_search

    req.check()
    start, started = time.monotonic(), now_iso()
    given = Path(req.target)
    onnx = given.suffix == ".onnx" and given.is_file()
    target = str(given.resolve()) if given.exists() else req.target
    spaces = _spaces(req, onnx)
    _check_target(target)
    out = Path(req.out or Path("tune") / given.name.split(".")[0])
    out.mkdir(parents=True, exist_ok=True)
    wanted = {v for s in spaces for v in s.dims.get(BUILD, ())}
    files = _builds(req, target, wanted, out, say) if onnx else {SOURCE: target}
    store = ResultStore(req.db)
    store.check_writable()
    run_id, fp = new_run_id(), fingerprint()
    result: dict[str, Any] = {"tables": [], "configs": [], "records": [], "searches": []}
    for i, space in enumerate(spaces):
        if BUILD in space.dims:
            space.dims[BUILD] = tuple(v for v in space.dims[BUILD] if v in files)
        share = (req.budget_s - (time.monotonic() - start)) / (len(spaces) - i)
        search = run_search(
            space,
            files,
            req.device,
            req.objectives,
            req.max_p99_ms,
            req.eta,
            share,
            str(out / "cells.sqlite"),
            req.seed,
            req.timeout,
            say,
        )
        result["searches"].append(search)
        result["tables"].append(tables(search, req.objectives, req.max_p99_ms))
        for objective in req.objectives:
            top = search.winner(objective, req.max_p99_ms)
            if top is None:
                continue
            path = out / f"{space.backend.name}.{objective}.toml"
            build = top.point.get(BUILD, SOURCE)
            config = bench_config(files[build], search, top.point, req.device)
            write_text(path, config_text(config, *run_config(config, files[SOURCE], build)))
            result["configs"].append(str(path))
        for record in tune_records(search, run_id, started, argv, req.max_p99_ms):
            record["duration_s"] = time.monotonic() - start
            record["id"] = store.add(record, fp)
            result["records"].append(record)
    result["elapsed_s"] = time.monotonic() - start
    return result
