"""What runs an application or a generated network on a reference, and its profile there.

An application runs on a reference as its build (made through the build path any model
takes) or, on a backend that runs no ONNX file, as the model it was exported from, by
name; a generated network as its build or its framework version, profiled in that
version's scoped form.  Every profile has the profiler's own cost per node taken off, so
its nodes sum to the time bench measures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlbench.harness.synth import ProfileFailed


def quiet(_: str) -> None:
    """Builds made again for each fit's profiles and timings go unannounced."""


def built_for(
    source: str,
    build: str,
    home: Path,
    say: Callable[[str], None],
    dynamic: bool | None = None,
    name: str | None = None,
) -> str:
    """``source`` itself for fp32, else its build through the build path any model takes
    (in ``home``/builds, by ``name`` or the source's stem; ``dynamic`` the INT8 mode,
    None: the graph's choice).  A build over its tolerance is still what the backend
    runs, so it is profiled all the same; one that failed outright fails the step."""
    from dlbench.harness.convert.build import build as make
    from dlbench.harness.convert.builds import build_path, with_mode
    from dlbench.harness.convert.request import BuildRequest

    if build == "fp32":
        return source
    out = build_path(home / "builds", source, build, name)
    out.parent.mkdir(parents=True, exist_ok=True)
    say(f"build {Path(source).name} --to {build}")
    record = make(BuildRequest(source=source, to=build, out=str(out), options=with_mode(build, dynamic)))
    if not out.is_file():
        raise ProfileFailed(f"{source}: its {build} build failed: {record.get('error')}")
    return str(out)


def run_at(
    source: str,
    native: str | None,
    ref: Any,  # a workload.Reference (which imports this module)
    home: Path,
    say: Callable[[str], None],
    dynamic: bool | None = None,
    name: str | None = None,
) -> str:
    """What runs an application (``source``, exported from ``native``) on ``ref``: its
    build (``built_for``), or on a backend that runs no ONNX file the model by its name."""
    if not ref.native:
        return built_for(source, ref.build, home, say, dynamic, name)
    if not native:
        raise ProfileFailed(f"{source}: no model name to run it by on {ref.runs_on}")
    return native


def profile_at(
    source: str,
    ref: Any,  # a workload.Reference (which imports this module)
    warmup: int,
    iterations: int,
    timeout: float | None,
    say: Callable[[str], None],
    db: str | None | bool = False,
    options: dict[str, Any] | None = None,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> dict[str, Any]:
    """``source`` profiled on ``ref`` in its own cell, every node kept, with its backend's
    of ``options`` (bench's -O, the workload's) and its inputs' ``shapes`` where its format
    records none; stored as a ``profile`` record in ``db`` (None: the default database),
    unless ``db`` is False."""
    from dlbench.harness.profile.runner import ProfileRequest, profile

    say(f"profile {Path(source).name} at {ref.label}")
    req = ProfileRequest(
        artifact=source,
        backend=ref.runs_on,
        options=options or {},
        batch_size=ref.batch,
        threads=ref.threads,
        warmup=warmup,
        iterations=iterations,
        timeout=timeout,
        store=db is not False,
        db=db if isinstance(db, str) else None,
        all_nodes=True,
        shapes=dict(shapes or {}),
    )
    record = profile(req)
    if record["status"] != "ok":
        raise ProfileFailed(f"{source}: its profile at {ref.label} failed: {record.get('error')}")
    return without_profiler(record["metrics"]["profile"])


PROFILED_FLOOR = 0.1  # the least of its profiled time a node keeps


def without_profiler(prof: dict[str, Any]) -> dict[str, Any]:
    """``prof`` with each node's time less the profiler's own cost, so that its nodes sum
    to the run's unprofiled time (``plain_ms_per_run``), the time bench measures and the
    score compares.  The profiler's cost is a few µs on every node it times (the same
    constant ``c`` taken off each, none below a tenth of its profiled time): on the zoo's
    small inference models at batch 1 it was 2.4 to 6 µs a node, half or more of
    resnet50-mini's and din-mini's profiled time, and the fit would have reproduced it.
    Where the unprofiled run is the longer (time outside the nodes), every node is scaled
    up to it.  Class shares and the node total follow; the profiled total is kept."""
    import numpy as np

    plain, nodes = prof.get("plain_ms_per_run"), prof["nodes"]
    us = np.array([n["us"] for n in nodes], dtype=float)
    if not plain or not nodes or us.sum() <= 0:
        return prof
    target = plain * 1000
    floor = PROFILED_FLOOR * us
    if target >= us.sum() or floor.sum() >= target:
        fixed = us * (target / us.sum())
    else:
        lo, hi = 0.0, float(us.max())
        for _ in range(60):  # the cost per node, by bisection: the sum falls as it grows
            c = (lo + hi) / 2
            lo, hi = (c, hi) if np.maximum(us - c, floor).sum() > target else (lo, c)
        fixed = np.maximum(us - hi, floor)
    out = [{**n, "us": float(u)} for n, u in zip(nodes, fixed)]
    shares: dict[str, float] = {}
    for n in out:
        shares[n["class"]] = shares.get(n["class"], 0.0) + n["us"] / fixed.sum()
    return {
        **prof,
        "nodes": out,
        "classes": [{"class": c, "share": v} for c, v in sorted(shares.items(), key=lambda kv: -kv[1])],
        "node_ms_per_run": float(fixed.sum()) / 1000,
        "profiled_node_ms_per_run": prof["node_ms_per_run"],
    }


def network_runs(
    network: Path, refs: list[Any], dynamic: bool, built: dict[str, str] | None = None
) -> tuple[list[str], list[str], list[dict[str, tuple[int, ...]]]]:
    """What runs ``network`` on each reference: the file bench times (its build, through
    the build path, unless ``built`` has it; on a native backend its framework version),
    the file a profile reads (there, the scoped version), and the inputs' shapes where
    that format records none."""
    from dlbench.harness.synth.frameworks import input_shape, native_versions

    versions = {r.runs_on: native_versions(network, r.runs_on) for r in refs if r.native}
    made = built or {}
    timed = [
        versions[r.runs_on][0]
        if r.native
        else made.get(r.build) or built_for(str(network), r.build, network.parent, quiet, dynamic)
        for r in refs
    ]
    read = [versions[r.runs_on][1] if r.native else f for f, r in zip(timed, refs)]
    return timed, read, [input_shape(network, r.runs_on) if r.native else {} for r in refs]
