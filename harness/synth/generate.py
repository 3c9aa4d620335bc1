"""``dlbench synth generate``: the workload's representatives, repeated to its time shares.

1. Each op class's units are clustered (``fit.kmedoids``), weighted by the time their
   nodes take on the fp32 references (each application's time normalized to its own run
   on the first reference, times its weight); clusters go to classes by time share.
2. A calibration network (every medoid a few times) is profiled on every reference (a
   built reference profiles its build): a medoid's measured cost is what its instances
   take there, bridges and the runtime's own reorders included.
3. Non-negative least squares gives each medoid a repetition count that reproduces, on
   every reference at once, the applications' time per class (and per cluster where the
   graph is the fp32 one), scaled to the time budget; an integer search then rounds the
   counts on what is judged: the class divergence and each reference's time relative to
   the first (the speed ratio the score predicts).
4. The fitted network is profiled in its turn and refitted on its units' costs in place;
   the network whose own profile comes closest to the workload is kept.
5. The static self-check: the op-class time shares the counts predict, against the
   workload's, as a total-variation divergence on each reference.  A budget too small
   for integer counts to hit the shares is doubled until they do (or the whole set's
   time is reached), and the budget used is stated.  The measured divergence follows,
   with the divergence between two profiles of the network itself: its noise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.synth.units import Unit

DIVERGENCE_LIMIT = 0.05
NETWORK_KIND = "dlbench-synth-network"  # the description's kind: what validate reads
CALIBRATION_REPEATS = 3
REFITS = 3  # fits on the costs measured in the fitted network itself
_INSTANCE = re.compile(r"u(\d+)_i\d+_")


def divergence(p: dict[str, float], q: dict[str, float]) -> float:
    """Total-variation distance between two time-share vectors (each normalized first)."""
    keys = sorted(set(p) | set(q))
    return _tv(np.array([p.get(k, 0.0) for k in keys]), np.array([q.get(k, 0.0) for k in keys]))


def contributions(workload: dict[str, Any]) -> np.ndarray:
    """[nodes, refs]: each node's time as a fraction of its application's time on the first
    reference, times the application's normalized weight (0 on a built reference, whose
    graph has other nodes)."""
    apps = workload["applications"]
    total = sum(a["weight"] for a in apps)
    scale = [a["weight"] / total / (a["node_ms"][0] * 1000) for a in apps]
    return np.array([[us * scale[n["app"]] for us in n["us"]] for n in workload["nodes"]])


def class_targets(workload: dict[str, Any]) -> list[dict[str, float]]:
    """Per reference, each op class's time in the weighted mix (fractions of the first
    reference's): from the applications' class shares, so a built reference counts too."""
    apps = workload["applications"]
    total = sum(a["weight"] for a in apps)
    out: list[dict[str, float]] = []
    for r in range(len(workload["references"])):
        mix: dict[str, float] = {}
        for a in apps:
            scale = a["weight"] / total * a["node_ms"][r] / a["node_ms"][0]
            for c, share in a["classes"][r].items():
                mix[c] = mix.get(c, 0.0) + share * scale
        out.append(mix)
    return out


def medoids(workload: dict[str, Any], clusters: int) -> tuple[list[Unit], list[int]]:
    """The representatives and, per node, the one that stands for it (-1: none does)."""
    from dlbench.harness.synth.fit import kmedoids
    from dlbench.harness.synth.workload import Reference, matched

    same = matched([Reference.from_json(r) for r in workload["references"]])
    contrib = contributions(workload)[:, same]
    weight = (contrib / contrib.sum(axis=0)).mean(axis=1)
    units = [Unit.from_json(n["unit"]) if n["unit"] else None for n in workload["nodes"]]
    distinct: dict[Unit, float] = {}
    for u, w in zip(units, weight):
        if u is not None:
            distinct[u] = distinct.get(u, 0.0) + w
    by_class: dict[str, list[Unit]] = {}
    for u in distinct:
        by_class.setdefault(u.cls, []).append(u)
    total = sum(distinct.values()) or 1.0
    chosen: list[Unit] = []
    for members in sorted(by_class.values(), key=lambda m: -sum(distinct[u] for u in m)):
        w = np.array([distinct[u] for u in members])
        keys = [u.key() for u in members]
        heavy_keys = {k for k, wk in zip(keys, w) if wk >= 0.01 * w.sum()}
        k = max(len(heavy_keys), round(clusters * w.sum() / total), 1)
        points = np.array([u.features() for u in members])
        picked, _ = kmedoids(points, w, keys, k)
        chosen.extend(members[i] for i in picked)
    feats = np.array([u.features() for u in chosen])
    owner = []
    for u in units:
        if u is None:
            owner.append(-1)
            continue
        candidates = [j for j, m in enumerate(chosen) if m.key() == u.key()] or [
            j for j, m in enumerate(chosen) if m.cls == u.cls
        ]
        d = np.linalg.norm(feats[candidates] - np.array(u.features()), axis=1)
        owner.append(candidates[int(np.argmin(d))])
    return chosen, owner


def unit_costs(
    units: list[Unit], profiles: list[dict[str, Any]], counts: list[int]
) -> tuple[list[list[dict[str, float]]], list[list[float]]]:
    """Per reference and unit: the µs per instance its nodes take by class (bridges and the
    reorders that ran after it included), and the µs of its own op's class; a unit that
    did not run (count 0) has none."""
    from dlbench.harness.profile.classes import node_class

    by_class: list[list[dict[str, float]]] = []
    main: list[list[float]] = []
    for prof in profiles:
        classes: list[dict[str, float]] = [{} for _ in units]
        own = [0.0] * len(units)
        current = None
        for n in sorted(prof["nodes"], key=lambda n: n.get("at", 0)):
            found = _INSTANCE.search(n["node"])
            current = int(found.group(1)) if found else current
            if current is None or current >= len(units) or not counts[current]:
                continue
            cls = node_class(n)
            classes[current][cls] = classes[current].get(cls, 0.0) + n["us"] / counts[current]
            if cls == units[current].cls:
                own[current] += n["us"] / counts[current]
        by_class.append(classes)
        main.append(own)
    return by_class, main


def solve(
    workload: dict[str, Any], owner: list[int], costs, main, budget_us: float
) -> tuple[np.ndarray, list[dict[str, float]], list[dict[str, float]]]:
    """Integer counts per unit; the target and the predicted µs per class on each reference."""
    from dlbench.harness.synth.fit import integer_counts, nnls
    from dlbench.harness.synth.workload import Reference, matched

    contrib = contributions(workload) * budget_us
    same = matched([Reference.from_json(r) for r in workload["references"]])
    target_classes = [{c: t * budget_us for c, t in mix.items()} for mix in class_targets(workload)]
    names = sorted({c for t in target_classes for c in t} | {c for ref in costs for u in ref for c in u})
    refs, k = len(target_classes), len(main[0])
    rows, targets, weights = [], [], []
    for r in range(refs):
        scale = 1.0 / (sum(target_classes[r].values()) or 1.0)
        for c in names:
            rows.append([costs[r][j].get(c, 0.0) for j in range(k)])
            targets.append(target_classes[r].get(c, 0.0))
            weights.append(scale)
        if r not in same:
            continue  # a built graph's nodes are not the clusters'
        for j in range(k):
            rows.append([main[r][j] if i == j else 0.0 for i in range(k)])
            targets.append(float(contrib[[i for i, o in enumerate(owner) if o == j], r].sum()))
            weights.append(0.5 * scale)
    w = np.array(weights)[:, None]
    a, b = np.array(rows) * w, np.array(targets) * w[:, 0]
    spent = np.array([[[costs[r][j].get(c, 0.0) for j in range(k)] for c in names] for r in range(refs)])
    goal = [np.array([t.get(c, 0.0) for c in names]) for t in target_classes]
    fitted = float(np.sum(b**2)) or 1.0

    def error(n: np.ndarray) -> float:
        """What the self-check judges (the worst reference's class divergence); how far
        the network's time on each reference, relative to the first, is from the mix's
        (the speed ratio between references, which is what the score predicts); and the
        least-squares residual, relative, to keep the cluster mix and the time scale."""
        times = [float((spent[r] @ n).sum()) for r in range(refs)]
        if not times[0]:
            return math.inf
        worst = max(_tv(spent[r] @ n, goal[r]) for r in range(refs))
        ratios = sum(
            abs(math.log(max(times[r], 1e-12) / times[0]) - math.log(goal[r].sum() / goal[0].sum()))
            for r in range(1, refs)
        )
        return worst + ratios + 0.1 * float(np.sum((a @ n - b) ** 2)) / fitted

    counts = integer_counts(a, b, integer_counts(a, b, nnls(a, b)), error=error)
    predicted = [{c: float(v) for c, v in zip(names, spent[r] @ counts)} for r in range(refs)]
    return counts, target_classes, predicted


def _quiet(_: str) -> None:
    """The network's own builds, rebuilt each round, go unannounced."""


def _tv(p: np.ndarray, q: np.ndarray) -> float:
    """``divergence`` on aligned arrays: the form the integer search evaluates often."""
    return 0.5 * float(np.abs(p / (p.sum() or 1.0) - q / (q.sum() or 1.0)).sum())


def generate(
    workload: dict[str, Any],
    out: Path,
    *,
    clusters: int = 24,
    fraction: float = 0.1,
    warmup: int = 5,
    iterations: int = 20,
    timeout: float | None = None,
    seed: int = 0,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The synthetic network at ``out`` (ONNX) and its description beside it (.json)."""
    import onnx

    from dlbench.core.atomic import scratch, write_json
    from dlbench.harness.synth.baselines import write as write_baselines
    from dlbench.harness.synth.emit import network, spec
    from dlbench.harness.synth.frameworks import write_versions
    from dlbench.harness.synth.validate import build_all
    from dlbench.harness.synth.workload import Reference, built_for, profile_at, set_mode

    refs = [Reference.from_json(r) for r in workload["references"]]
    dynamic = set_mode(workload["applications"])
    units, owner = medoids(workload, clusters)
    say(f"{len(units)} representatives from {len(workload['nodes'])} nodes")

    def measure(counts: list[int], path: Path) -> tuple[Any, Any, list[dict[str, Any]]]:
        onnx.save(network(list(zip(units, counts)), seed, name=out.stem), str(path))
        profiles = [
            profile_at(
                built_for(str(path), ref.build, path.parent, _quiet, dynamic),
                ref,
                warmup,
                iterations,
                timeout,
                say,
            )
            for ref in refs
        ]
        return (*unit_costs(units, profiles, counts), profiles)

    with scratch("dlbench-synth") as tmp:
        # Calibration: every representative a few times.  Then each fitted network itself:
        # its units' costs in place (their neighbours, their lane's length) replace the
        # earlier ones for the next fit, and the network whose own profile comes closest
        # to the workload's is the one kept, its profile the measured check.
        costs, main, _ = measure([CALIBRATION_REPEATS] * len(units), Path(tmp) / "calibration.onnx")
        counts, used, targets, predicted = _fit(workload, owner, costs, main, fraction)
        tried: list[tuple[float, Any, float, Any, Any, Any]] = []
        for _ in range(1 + REFITS):
            if not any(counts) or any(np.array_equal(counts, t[1]) for t in tried):
                break
            placed, own, profiles = measure(list(counts), Path(tmp) / "fitted.onnx")
            shares = [{c["class"]: c["share"] for c in m["classes"]} for m in profiles]
            worst = max(divergence(m, t) for m, t in zip(shares, targets))
            tried.append((worst, counts, used, predicted, profiles, own))
            for j, n in enumerate(counts):
                for r in range(len(refs)):
                    costs[r][j], main[r][j] = (placed[r][j], own[r][j]) if n else (costs[r][j], main[r][j])
            counts, used, targets, predicted = _fit(workload, owner, costs, main, used)
    if not tried:
        raise UserError("the fit gave no unit a count: the workload's nodes have no emittable work")
    _, counts, used, predicted, measured, main = min(tried, key=lambda t: t[0])
    checks = [divergence(p, t) for p, t in zip(predicted, targets)]
    lanes = [(u, int(n)) for u, n in zip(units, counts)]
    model = network(lanes, seed, name=out.stem)
    onnx.helper.set_model_props(model, {"dlbench.model": out.stem, "dlbench.synthetic": "1", **spec(lanes)})
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    apps = workload["applications"]
    description = {
        "kind": NETWORK_KIND,
        "onnx": out.name,
        "references": workload["references"],
        "applications": [
            {"source": a["source"], "weight": a["weight"], "native": a.get("native")} for a in apps
        ],
        "budget_fraction": used,
        "int8_dynamic": dynamic,
        "units": [
            {**u.to_json(), "count": int(n), "cost_us": [c[j] for c in main]}  # as it ran there
            for j, (u, n) in enumerate(lanes)
        ],
        "target_class_us": targets,
        "predicted_class_us": predicted,
        "predicted_divergence": checks,
        "divergence_limit": DIVERGENCE_LIMIT,
        "self_check": "ok" if max(checks) <= DIVERGENCE_LIMIT else "over the limit",
    }
    # Its other forms: the framework versions (the same graph, checked against ONNX
    # Runtime) and its builds through the build path any model takes, verified; and the
    # baselines validate scores beside it, from the same workload, whose framework
    # versions are written with the network's (one process per framework).
    description.update(write_baselines(workload, out.parent, out.stem, seed))
    made = [description, *description["micro_cells"], *description["replays"]]
    networks = [out] + [out.parent / e["onnx"] for e in made[1:]]
    for entry, (versions, errors) in zip(made, write_versions(networks, say)):
        entry["frameworks"], entry["framework_errors"] = versions, errors
    built, left = build_all([str(out)], list(BUILDS), out.parent / "builds", say, modes={str(out): dynamic})
    description["builds"] = {t: Path(p).name for t, p in built[str(out)].items() if t != "fp32"}
    description["builds_left_out"] = left
    # The network measured as it runs: its own profile's class shares against the
    # workload's (noise included, which the static check above has none of).
    shares = [{c["class"]: c["share"] for c in m["classes"]} for m in measured]
    description["measured_class_share"] = shares
    description["measured_divergence"] = [divergence(m, t) for m, t in zip(shares, targets)]
    description["measured_ms"] = [m["node_ms_per_run"] for m in measured]
    # The same network profiled once more: how far two measurements of one network are
    # apart here and now, the noise any measured divergence carries.
    again = [
        profile_at(
            built_for(str(out), ref.build, out.parent, _quiet, dynamic), ref, warmup, iterations, timeout, say
        )
        for ref in refs
    ]
    repeat = [{c["class"]: c["share"] for c in m["classes"]} for m in again]
    description["repeat_divergence"] = [divergence(a, b) for a, b in zip(shares, repeat)]
    description["applications_ms"] = [sum(a["node_ms"][i] for a in apps) for i in range(len(refs))]
    write_json(out.with_suffix(".json"), description)
    return description


BUILDS = ("int8", "fp16")


def _fit(workload, owner, costs, main, fraction: float):
    """Counts for the smallest budget, from ``fraction`` of the set's time doubling up to
    all of it, whose predicted class shares pass the self-check; where none does (a class
    no unit reproduces), the smallest within 0.01 of the best divergence seen.  Returns
    the counts, the budget used, the targets and the prediction."""
    whole_us = sum(a["node_ms"][0] for a in workload["applications"]) * 1000
    tried = []
    used = fraction
    while True:
        counts, targets, predicted = solve(workload, owner, costs, main, used * whole_us)
        worst = max(divergence(p, t) for p, t in zip(predicted, targets))
        tried.append((worst, used, counts, targets, predicted))
        if worst <= DIVERGENCE_LIMIT or used >= 1.0:
            break
        used = min(1.0, used * 2)
    best = min(t[0] for t in tried)
    worst, used, counts, targets, predicted = next(
        t for t in tried if t[0] <= max(best + 0.01, DIVERGENCE_LIMIT)
    )
    return counts, used, targets, predicted
