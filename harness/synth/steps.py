"""The three steps as the Python API: each takes its request and returns its result with
the printed table (``status`` "ok" or why not).  Bad input is refused before any cell runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.synth.request import SynthGenerateRequest, SynthProfileRequest, SynthValidateRequest

Say = Callable[[str], None]


def profile(req: SynthProfileRequest, say: Say = lambda _: None) -> dict[str, Any]:
    from dlbench.core.atomic import write_json
    from dlbench.harness.synth.tables import workload_tables
    from dlbench.harness.synth.workload import Application, ProfileFailed, Reference, profile_workload

    apps = [Application.parse(a) for a in req.applications]
    for app in apps:
        if not Path(app.source).is_file():
            raise UserError(
                f"{app.source}: no such file (synth profile reads ONNX files; export others first)"
            )
    for name, value in (("--iterations", req.iterations), ("--warmup", req.warmup + 1)):
        if value < 1:
            raise UserError(f"{name}: give at least {1 if name == '--iterations' else 0}")
    refs = tuple(Reference.parse(r) for r in req.references)
    try:
        workload = profile_workload(
            apps, refs, warmup=req.warmup, iterations=req.iterations, timeout=req.timeout, say=say
        )
    except ProfileFailed as exc:
        return {"status": "failed", "table": str(exc)}
    write_json(req.out, workload)
    say(f"workload written to {req.out}")
    return {"status": "ok", "workload": workload, "table": workload_tables(workload)}


def generate(req: SynthGenerateRequest, say: Say = lambda _: None) -> dict[str, Any]:
    from dlbench.harness.synth.generate import generate as make
    from dlbench.harness.synth.tables import network_table
    from dlbench.harness.synth.workload import KIND, ProfileFailed

    workload = _read(req.workload, KIND, "dlbench synth profile")
    if req.clusters < 1:
        raise UserError(f"--clusters {req.clusters}: give at least 1")
    if not 0 < req.budget <= 1:
        raise UserError(f"--budget {req.budget}: give a fraction in (0, 1]")
    out = Path(req.out)
    if out.suffix != ".onnx":
        raise UserError(f"--out {req.out}: the network is an ONNX file (.onnx)")
    try:
        described = make(
            workload,
            out,
            clusters=req.clusters,
            fraction=req.budget,
            warmup=req.warmup,
            iterations=req.iterations,
            timeout=req.timeout,
            seed=req.seed,
            say=say,
        )
    except ProfileFailed as exc:
        return {"status": "failed", "table": str(exc)}
    status = "ok" if described["self_check"] == "ok" else "self-check over the limit"
    return {"status": status, "network": described, "table": network_table(described)}


def validate(req: SynthValidateRequest, say: Say = lambda _: None) -> dict[str, Any]:
    from dlbench.core.atomic import write_json
    from dlbench.harness.backends import get_backend
    from dlbench.harness.compare.noise import DEFAULT_FLOOR
    from dlbench.harness.synth.tables import validation_table
    from dlbench.harness.synth.validate import Matrix, measure, validate

    described = _read(req.network, "dlbench-synth-network", "dlbench synth generate")
    home = Path(req.network).parent
    synth = str(home / described["onnx"])
    apps = {a["source"]: a["weight"] for a in described["applications"]}
    missing = [p for p in [synth, *apps] if not Path(p).is_file()]
    if missing:
        raise UserError(f"{missing[0]}: no such file (the network's description names it)")
    backends = [b for b in req.backends if get_backend(b).availability().available]
    if not backends:
        raise UserError(f"--backends {','.join(req.backends)}: none is available here")
    matrix = Matrix(backends, req.builds, req.batch_sizes, req.threads, req.allocators, ["", *req.envs])
    workdir = home / "builds"
    workdir.mkdir(parents=True, exist_ok=True)
    results, failed = measure(list(apps), synth, matrix, workdir, min_duration=req.min_duration, say=say)
    verdict = validate(results, apps, synth, {"onnxruntime"}, DEFAULT_FLOOR)
    verdict["matrix"] = {
        "configurations": len(matrix.configs()),
        "backends": backends,
        "builds_left_out": failed,
    }
    verdict["measured"] = results
    write_json(req.out or str(home / "validation.json"), verdict)
    return {"status": "ok" if verdict.get("predictors") else "too few configurations ran",
            "validation": verdict, "table": validation_table(verdict)}  # fmt: skip


def _read(path: str, kind: str, maker: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise UserError(f"{path}: not {maker}'s output")
    return data
