"""What a search leaves: the best point per objective as a config ``bench --config``
reads, the default-versus-best table with the settings ranked by their effect, and one
``tune`` record per backend and precision (the best throughput measured), which bench
tables and reports compare their rows with (``harness.tune.headroom``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from dlbench.harness.output.tables import markdown, milliseconds
from dlbench.harness.tune.search import Measured, Search, bench_request, score
from dlbench.harness.tune.space import NOT_DEFAULTS, SOURCE, Point, key

UNITS = {"throughput": "samples/s", "latency": "ms p99 at batch 1"}


def figure(m: Measured | None, objective: str) -> str:
    if m is None or not m.ok():
        return "-"
    if objective == "latency":
        return milliseconds(m.p99())
    return f"{m.throughput():.4g} (p99 {milliseconds(m.p99())})"


def gain(s: float | None, reference: float | None, objective: str) -> float | None:
    """How many times better score ``s`` is than ``reference`` (scores: higher is better;
    a latency score is minus the p99, so the ratio turns round)."""
    if s is None or not reference:
        return None
    return s / reference if objective == "throughput" else reference / s


def how(search: Search, m: Measured) -> str:
    """How the best was chosen (the median of the last rung's fresh processes) and where
    its figure comes from (one more process after the choice)."""
    n = sum(1 for r in search.runs if r.rung == m.rung and key(r.point) == key(m.point) and r.ok())
    chosen = f"rung {m.rung}" + (f", median of {n} processes" if n > 1 else "")
    if m.why != "confirmed":
        return chosen
    again = "; its figure from one more after the choice"
    return chosen + again + (", as bench measures" if m.bench_rule else "")


def effects(search: Search, winner: Point, objective: str, max_p99_ms: float | None) -> list[dict[str, Any]]:
    """Each setting where ``winner`` leaves the default: what that setting alone did in rung 0
    (its one-factor point over the default point), largest effect first."""
    base = search.space.default()
    rung0 = {key(m.point): m for m in search.at_rung(0)}
    ref = rung0.get(key(base))
    ref_score = score(ref, objective, max_p99_ms) if ref else None
    out = []
    for dim, value in winner.items():
        if value == base[dim]:
            continue
        alone = rung0.get(key({**base, dim: value}))
        s = score(alone, objective, max_p99_ms) if alone else None
        ratio = gain(s, ref_score, objective)
        out.append({"setting": dim, "default": base[dim], "best": value, "ratio": ratio})
    return sorted(out, key=lambda e: -abs(math.log(e["ratio"])) if e["ratio"] else 0.0)


def one_factor(search: Search, max_p99_ms: float | None) -> dict[str, dict[str, float]]:
    """Throughput of every one-factor point over the default's, in rung 0: what each
    documented setting is worth here (``dlbench env``'s hint reads it)."""
    base = search.space.default()
    rung0 = {key(m.point): m for m in search.at_rung(0)}
    ref = rung0.get(key(base))
    ref_score = score(ref, "throughput", max_p99_ms) if ref else None
    out: dict[str, dict[str, float]] = {}
    for dim, values in search.space.dims.items():
        for v in values[1:]:
            m = rung0.get(key({**base, dim: v}))
            s = score(m, "throughput", max_p99_ms) if m else None
            if s is not None and ref_score:
                out.setdefault(dim, {})[str(v)] = s / ref_score
    return out


def bench_config(artifact: str, search: Search, point: Point, device: str) -> dict[str, Any]:
    """The ``bench --config`` keys that measure ``point`` as bench does by default: read back
    through bench's own parser, only the keys away from its defaults (and what it runs)."""
    from dlbench.core import flags
    from dlbench.harness.backends import options_argv
    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.cli import build_parser
    from dlbench.harness.cli.config import parse_args, resolved

    req = replace(bench_request(artifact, search.space, point, device, StopRule(), None, 0, None), db=None)
    argv = ["bench", *flags.to_argv(req), *options_argv(req.options)]
    bare = resolved(parse_args(build_parser(), ["bench", artifact, "-b", search.space.backend.name]))
    full = resolved(parse_args(build_parser(), argv))
    return {k: v for k, v in full.items() if k in ("artifacts", "backend") or bare.get(k) != v}


# bench's keys that run spells another way: the model it runs the chain on, its backends.
RUN_KEYS = {"artifacts": "model", "backend": "backends"}


def run_config(bench: dict[str, Any], source: str, build: str) -> tuple[dict[str, Any], list[str]]:
    """The same point as ``dlbench run`` keys, and bench's keys run has no way to say.

    run starts from the file or name that was tuned and makes the build itself
    (``--precisions``), so its model is the source, not the build's file."""
    from dlbench.core.devices import training_name
    from dlbench.harness.cli import build_parser
    from dlbench.harness.cli.config import config_actions, key_of, subparser
    from dlbench.harness.pipeline.runner import BUILD_PRECISIONS

    run_parser = subparser(build_parser(), "run")
    assert run_parser is not None
    known = {key_of(a) for a in config_actions(run_parser)}
    out: dict[str, Any] = {}
    left: list[str] = []
    for k, v in bench.items():
        if k == "artifacts":
            out["model"] = source
        elif k == "device":
            out["device"] = training_name(v[0] if isinstance(v, list) else v)
        elif k == "threads" and isinstance(v, list) and len(v) == 1:
            out["threads"] = v[0]  # run's is one count, bench's a list to sweep
        elif RUN_KEYS.get(k, k) in known:
            out[RUN_KEYS.get(k, k)] = v
        else:
            left.append(k)
    if build != SOURCE:
        if build in BUILD_PRECISIONS:
            out["precisions"] = [build]
        else:
            left.append(f"build {build}")
    return out, left


def config_text(bench: dict[str, Any], run: dict[str, Any], left: list[str]) -> str:
    """One file both commands read: the keys they share at the top, each one's own in its
    table (``harness.cli.config``)."""
    from dlbench.harness.cli.config import to_toml

    shared = {k: v for k, v in bench.items() if run.get(k, object()) == v}
    head = "# dlbench bench --config THIS (the point as tuned), dlbench run --config THIS (the chain)\n"
    if left:
        head += f"# run cannot say, and runs its default for: {', '.join(left)}\n"
    own = [
        (name, {k: v for k, v in d.items() if k not in shared})
        for name, d in (("bench", bench), ("run", run))
    ]
    return head + to_toml(shared) + "".join(f"\n[{name}]\n{to_toml(d)}" for name, d in own if d)


def tables(search: Search, objectives: list[str], max_p99_ms: float | None) -> str:
    base = search.space.default()
    parts = []
    for objective in objectives:
        top = search.winner(objective, max_p99_ms)
        if top is None:
            parts.append(f"{search.space.backend.name}, {objective}: no point met the objective")
            continue
        ref = search.at(base, top.rung, objective, max_p99_ms)
        ref_score = score(ref, objective, max_p99_ms) if ref else None
        times = gain(score(top, objective, max_p99_ms), ref_score, objective)
        rows = [
            ["default", figure(ref, objective), ""],
            [
                f"best ({how(search, top)})",
                figure(top, objective),
                f"{times - 1:+.0%}" if times else "",
            ],
        ]
        head = f"{search.space.backend.name}, {objective} ({UNITS[objective]})"
        if search.stopped_early:
            head += ": the budget ended the search before its last rung was through"
        parts.append(f"{head}\n\n" + markdown(("", "Measured", "vs default"), rows))
        ranked = effects(search, top.point, objective, max_p99_ms)
        if ranked:
            settings = [
                [
                    e["setting"],
                    e["default"],
                    e["best"],
                    f"{e['ratio'] - 1:+.0%}" if e["ratio"] else "not alone",
                ]
                for e in ranked
            ]
            parts.append(markdown(("Setting", "Default", "Best", "Alone, in rung 0"), settings))
    return "\n\n".join(parts)


def tune_records(
    search: Search, run_id: str, started: str, argv: list[str] | None, max_p99_ms: float | None
) -> list[dict[str, Any]]:
    """One ``tune`` record per precision measured: the best throughput at it, with the
    settings, the one-factor effects and every point measured."""
    from dlbench.harness.store.records import new_record

    out = []
    for precision in dict.fromkeys(m.record["precision"] for m in search.runs if m.ok() and m.record):
        top = search.winner("throughput", max_p99_ms, precision)
        if top is None or top.record is None:
            continue
        r = top.record
        out.append(
            new_record(
                "tune",
                run_id=run_id,
                identity={
                    "model": r["model"],
                    "backend": r["backend"],
                    "device": r["device"],
                    "precision": precision,
                },
                started=started,
                argv=argv,
                device=r["device"],
                status="ok",
                model=r["model"],
                backend=r["backend"],
                backend_version=r.get("backend_version"),
                precision=precision,
                batch_size=r["batch_size"],
                scenario=r.get("scenario"),
                intra_op_threads=r["intra_op_threads"],
                inter_op_threads=r["inter_op_threads"],
                throughput_sps=r["throughput_sps"],
                metrics={
                    "settings": {k: v for k, v in top.point.items()},
                    "rung": top.rung,
                    "latency_ms": r.get("latency_ms"),
                    "max_p99_ms": max_p99_ms,
                    "one_factor": one_factor(search, max_p99_ms),
                    "defaults": {k: v for k, v in search.space.default().items() if k not in NOT_DEFAULTS},
                    "plan": search.plan,
                    "confirmed": [
                        {
                            "settings": m.point,
                            "throughput_sps": m.throughput(),
                            "p99_ms": m.p99(),
                            "as_bench": m.bench_rule,
                        }
                        for m in search.confirmed.values()
                    ],
                    "stopped_early": search.stopped_early,
                    "points": [
                        {
                            "settings": m.point,
                            "rung": m.rung,
                            "repeat": m.repeat,
                            "throughput_sps": m.throughput(),
                            "p99_ms": m.p99(),
                            "error": m.error,
                            "why": m.why,
                        }
                        for m in search.runs
                    ],
                },
            )
        )
    return out
