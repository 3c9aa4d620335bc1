"""The three steps as the Python API: each takes its request and returns its result with
the printed table (``status`` "ok" or why not).  Bad input is refused before any cell runs
(UserError); a profile, export or training cell that fails raises ``ProfileFailed``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.synth.request import (
    ProfileRuns,
    SynthGenerateRequest,
    SynthProfileRequest,
    SynthValidateRequest,
)

Say = Callable[[str], None]


def profile(req: SynthProfileRequest, say: Say = lambda _: None) -> dict[str, Any]:
    from dlbench.core.atomic import write_json
    from dlbench.harness.backends import check_options
    from dlbench.harness.synth.tables import workload_tables
    from dlbench.harness.synth.workload import (
        Application,
        Reference,
        check_named,
        check_references,
        named_in,
        profile_workload,
    )
    from dlbench.models.registry import list_models
    from dlbench.models.user import hub

    apps = [Application.parse(a) for a in req.applications]
    for app in apps:
        if (
            not Path(app.source).is_file()
            and app.source not in list_models()
            and hub.parse(app.source) is None
        ):
            raise UserError(
                f"{app.source}: no such file, not a zoo model (dlbench models) and not a model by name "
                f"({hub.prefixes()})"
            )
    _check_runs(req)
    refs = tuple(Reference.parse(r) for r in req.references)
    check_references(refs)
    check_options(req.options, sorted({r.runs_on for r in refs}))
    check_named(refs, [Path(a.source).name for a in apps if Path(a.source).is_file()])
    apps = [_exported(app, Path(req.out).parent, say) for app in apps]
    workload = profile_workload(
        apps,
        refs,
        warmup=req.warmup,
        iterations=req.iterations,
        timeout=req.timeout,
        say=say,
        db=req.db,
        home=Path(req.out).parent,
        timings=req.timings,
        options=req.options,
    )
    for a in workload["applications"]:
        a["source"] = named_in(Path(req.out).parent, a["source"])
    write_json(req.out, workload)
    say(f"workload written to {req.out}")
    return {"status": "ok", "workload": workload, "table": workload_tables(workload)}


def generate(req: SynthGenerateRequest, say: Say = lambda _: None) -> dict[str, Any]:
    from dlbench.harness.synth.generate import generate as make
    from dlbench.harness.synth.playoff import moved_lines
    from dlbench.harness.synth.tables import network_table
    from dlbench.harness.synth.workload import KIND, opened_from

    workload = _read(req.workload, KIND, "dlbench synth profile")
    _check_runs(req)
    _at_least(
        ("--clusters", req.clusters, 1),
        ("--networks", req.networks, 1),
        ("--refits", req.refits, 0),
        ("--local-refits", req.local_refits, 0),
    )
    if not req.ratio_weight >= 0:
        raise UserError(f"--ratio-weight {req.ratio_weight}: give 0 or more")
    if not 0 < req.budget <= 1:
        raise UserError(f"--budget {req.budget}: give a fraction in (0, 1]")
    if not req.budget <= req.max_budget <= 1:
        raise UserError(f"--max-budget {req.max_budget}: give a fraction in [--budget, 1]")
    out = Path(req.out)
    if out.suffix != ".onnx":
        raise UserError(f"--out {req.out}: the network is an ONNX file (.onnx)")
    for a in workload.get("applications", []):
        a["source"] = opened_from(Path(req.workload).parent, a["source"])
    described = make(
        workload,
        out,
        networks=req.networks,
        clusters=req.clusters,
        fraction=req.budget,
        ceiling=req.max_budget,
        warmup=req.warmup,
        iterations=req.iterations,
        timeout=req.timeout,
        timings=req.timings,
        refits=(req.refits, req.local_refits),
        ratio_weight=req.ratio_weight,
        seed=req.seed,
        say=say,
    )
    problems = ["self-check over the limit"] if described["self_check"] != "ok" else []
    problems += ["the applications' score moved since their profile"] if any(moved_lines(described)) else []
    status = "; ".join(problems) or "ok"
    return {"status": status, "network": described, "table": network_table(described)}


def _check_runs(req: ProfileRuns) -> None:
    _at_least(("--iterations", req.iterations, 1), ("--warmup", req.warmup, 0), ("--timings", req.timings, 0))


def _at_least(*flags: tuple[str, int, int]) -> None:
    for name, value, least in flags:
        if value < least:
            raise UserError(f"{name} {value}: give at least {least}")


def _files_of(
    entries: list[dict[str, Any]], key: str, home: Path, folder: Path | None = None
) -> dict[str, dict[str, str]]:
    """Each generated network's other files (``key``: its framework versions, or its builds
    in ``folder``), by its ONNX path: the description names them relative to its folder."""
    where = folder or home
    return {str(home / e["onnx"]): {k: str(where / f) for k, f in e[key].items()} for e in entries}


def validate(req: SynthValidateRequest, say: Say = lambda _: None) -> dict[str, Any]:
    from dlbench.core.atomic import write_json
    from dlbench.harness.backends import BACKENDS, check_options, get_backend
    from dlbench.harness.compare.noise import DEFAULT_FLOOR
    from dlbench.harness.synth.baselines import MICRO, REPLAY
    from dlbench.harness.synth.generate import NETWORK_KIND
    from dlbench.harness.synth.matrix import Matrix, measure, takes_onnx
    from dlbench.harness.synth.rounds import noise
    from dlbench.harness.synth.tables import validation_table
    from dlbench.harness.synth.validate import complete, scores, validate
    from dlbench.harness.synth.workload import Application, Reference, opened_from

    described = _read(req.network, NETWORK_KIND, "dlbench synth generate")
    home = Path(req.network).parent
    if "networks" not in described:
        raise UserError(f"{req.network}: written by an older dlbench synth generate; generate it again")
    for a in described["applications"]:
        a["source"] = opened_from(home, a["source"])
    nets = described["networks"]
    # The synthetic score: the networks' weighted geometric mean, as the applications' is.
    synth = {str(home / n["onnx"]): n["weight"] for n in nets}
    apps = {a["source"]: a["weight"] for a in described["applications"]}
    missing = [p for p in [*synth, *apps] if not Path(p).is_file()]
    if missing:
        raise UserError(f"{missing[0]}: no such file (the network's description names it)")
    unknown = [b for b in req.backends if b not in BACKENDS.names()]
    if unknown:
        raise UserError(f"--backends {unknown[0]}: no such backend (known: {', '.join(BACKENDS.names())})")
    backends = [b for b in req.backends if get_backend(b).availability().available]
    if not backends:
        raise UserError(f"--backends {','.join(req.backends)}: none is available here")
    natives = _files_of(nets, "frameworks", home)
    for b in backends:
        lacking = [Path(n).name for n, own in natives.items() if not takes_onnx(b) and b not in own]
        if lacking:
            versions = sorted(set().union(*natives.values()))
            raise UserError(
                f"--backends {b}: {lacking[0]} has no {b} version (synth generate makes {versions})"
            )
    _check_matrix(req)
    check_options(req.options, backends)
    matrix = Matrix(
        backends, req.builds, req.batch_sizes, req.threads, req.allocators, ["", *req.envs], req.options
    )
    sources = {a["source"]: a.get("native") for a in described["applications"]}
    # A native backend runs an application by the name it was exported from; one given to
    # synth profile as a file has none, and a configuration that cannot run one of the set
    # cannot score it: refused before anything is built or timed.
    unnamed = [Path(s).name for s, native in sources.items() if not native]
    by_name = [b for b in backends if not takes_onnx(b)]
    if unnamed and by_name:
        raise UserError(
            f"--backends {by_name[0]}: {len(unnamed)} of the {len(sources)} applications have no model "
            f"name to run there ({unnamed[0]} first), so none of its configurations could score the "
            f"set; give them to synth profile by name, or leave {by_name[0]} out"
        )
    workdir = home / "builds"
    workdir.mkdir(parents=True, exist_ok=True)
    extra = [_exported(Application.parse(b), workdir, say) for b in req.baselines]
    sources.update({b.source: b.native for b in extra})
    made = {name: described.get(key) or [] for name, key in ((MICRO, "micro_cells"), (REPLAY, "replays"))}
    generated = {
        name: {str(home / e["onnx"]): e["weight"] for e in entries} for name, entries in made.items()
    }
    natives.update(_files_of([e for entries in made.values() for e in entries], "frameworks", home))
    ready = _files_of(nets, "builds", home, workdir)
    # The generated networks' INT8 modes are their applications' (``workload.set_mode``).
    modes = {
        str(home / e["onnx"]): e["int8_dynamic"]
        for e in [*nets, *(e for es in made.values() for e in es)]
        if "int8_dynamic" in e
    }
    processes = _processes(
        len(apps), req.repeats, synth, *generated.values(), *({b.source: 1.0} for b in extra)
    )
    cells: dict[str, list[str]] = {}
    raw: dict[str, dict[str, list[float]]] = {}
    results, left, unverified = measure(
        sources,
        list(synth),
        natives,
        matrix,
        workdir,
        min_duration=req.min_duration,
        say=say,
        db=req.db,
        ready=ready,
        modes=modes,
        cells=cells,
        rounds=req.rounds,
        raw=raw,
        processes=processes,
    )
    baselines = tuple(b.source for b in extra)
    # The rounds' own disagreement on the applications' score is the floor a "which is
    # faster" verdict must rise above here and now (never below compare's default).
    ran = complete(results, [*apps, *synth])
    repeats = noise(raw, ran, lambda r: scores(r, apps, {}, ran)[1])
    # The synthetic score's own spread over the rounds beside it: an error no larger than
    # the two together is one these rounds cannot tell from noise.
    own = noise(raw, ran, lambda r: scores(r, synth, {}, ran)[1])
    if repeats and own:
        repeats["synthetic_spread"] = own["score_spread"]
    floor = max(DEFAULT_FLOOR, repeats["score_spread"]["median"]) if repeats else DEFAULT_FLOOR
    # The network is fitted on its references' backends: any other is held out.
    fitted_on = {Reference.from_json(r).runs_on for r in described["references"]}
    verdict = validate(results, apps, synth, fitted_on, floor, baselines, generated)
    verdict["rounds"] = {"asked": req.rounds, **(repeats or {})}
    verdict["processes"] = {Path(f).name: n for f, n in processes.items()}  # 1 for the others
    verdict["matrix"] = {
        "configurations": len(matrix.configs(takes_onnx)),
        "backends": backends,
        "options": req.options,
        "left_out": left,
        "timed_unverified": unverified,
        "cells": sum(map(len, cells.values())),
        "unstable_cells": cells.get("unstable", []),
    }
    verdict["measured"] = results
    verdict["measured_rounds"] = raw  # every round's figure, in the order the rounds ran
    write_json(req.out or str(home / "validation.json"), verdict)
    return {"status": "ok" if verdict.get("predictors") else "too few configurations ran",
            "validation": verdict, "table": validation_table(verdict)}  # fmt: skip


def _processes(applications: int, asked: int | None, *predictors: dict[str, float]) -> dict[str, int]:
    """The processes each predictor's network runs a cell in.  One process of one network
    is noisy (its throughput moved 20 % from one process to the next on a 2-core machine,
    however long it was timed), and the applications' score is a mean over one process of
    each application: a predictor of few networks is timed in as many processes, over its
    networks, as the set has applications (``asked``: that many each)."""
    return {f: asked or -(-applications // len(p)) for p in predictors for f in p}


def _check_matrix(req: SynthValidateRequest) -> None:
    """The matrix's values refused before any build or cell runs."""
    from dlbench.converters.base import BUILD_TARGETS
    from dlbench.harness.cells import allocator

    known = ["fp32", *BUILD_TARGETS.names()]
    for build in req.builds:
        if build not in known:
            raise UserError(f"--builds {build}: no such build (known: {', '.join(known)})")
    for name, values in (("--batch-sizes", req.batch_sizes), ("--threads", req.threads)):
        if not values or min(values) < 1:
            raise UserError(f"{name} {','.join(map(str, values))}: give positive numbers")
    for name in req.allocators:
        allocator.check(name)
    for name, value in (("--rounds", req.rounds), ("--repeats", req.repeats)):
        if value is not None and value < 1:
            raise UserError(f"{name} {value}: give at least 1")
    if not req.min_duration > 0:
        raise UserError(f"--min-duration {req.min_duration}: give a positive number of seconds")


def _exported(app, home: Path, say: Say):
    """A model by name, or a zoo model, exported to ONNX beside the workload (verified,
    as ``dlbench export`` does) and remembered by its name for the backends that run it
    natively.  A zoo model is a checkpoint first: one PyTorch training step (its weights
    do not change what is timed)."""
    from dataclasses import replace

    from dlbench.harness.convert.export import export
    from dlbench.harness.convert.request import ExportRequest
    from dlbench.harness.synth import ProfileFailed
    from dlbench.models.registry import list_models

    if Path(app.source).is_file():
        return app
    out = home / f"{app.source.replace(':', '_').replace('/', '_')}.onnx"
    if not out.is_file():
        source = app.source
        if app.source in list_models():
            source = _checkpoint(app.source, home / "zoo", say)
        say(f"export {app.source} to {out}")
        [record] = export(ExportRequest(sources=[source], out=str(out)), progress=say)
        if record["status"] != "ok":
            raise ProfileFailed(f"{app.source}: its export failed: {record.get('error')}")
    return replace(app, source=str(out), native=app.source)


def _checkpoint(model: str, home: Path, say: Say) -> str:
    from dlbench.harness.synth import ProfileFailed
    from dlbench.harness.training.request import TrainRequest
    from dlbench.harness.training.runner import train

    say(f"train {model} one step for a checkpoint to export")
    req = TrainRequest(model=model, frameworks=["pytorch"], steps=1, warmup_steps=0, out=str(home))
    [record] = train(req, progress=say)
    if record["status"] != "ok":
        raise ProfileFailed(f"{model}: its one training step failed: {record.get('error')}")
    return str(home / model / "pytorch")


def _read(path: str, kind: str, maker: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise UserError(f"{path}: not {maker}'s output")
    return data
