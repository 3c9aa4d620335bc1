"""How often each representative runs: what the counts aim at on every reference, and the
fit that picks them within a time budget.

The targets are the applications' time per op class on each reference, each application
counted by its weight rather than its run time (``contributions``, ``class_targets``); on
a native reference, their total time only (``shares_fitted``).
``solve`` gives integer counts for one budget; ``fit_budget`` doubles the budget until
the class shares pass the self-check.  The costs they are priced on are read from a
network's own profiles (``unit_costs``), pooled over every network a unit ran in.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from dlbench.harness.synth import RATIO_WEIGHT

if TYPE_CHECKING:
    from dlbench.harness.synth.units import Unit

DIVERGENCE_LIMIT = 0.05
_INSTANCE = re.compile(r"u(\d+)_i\d+_")  # a unit instance's node names, as emit names them


def divergence(p: dict[str, float], q: dict[str, float]) -> float:
    """Total-variation distance between two time-share vectors (each normalized first)."""
    keys = sorted(set(p) | set(q))
    return _tv(np.array([p.get(k, 0.0) for k in keys]), np.array([q.get(k, 0.0) for k in keys]))


def shares_fitted(workload: dict[str, Any]) -> list[bool]:
    """Per reference, whether the network is fitted to the applications' class shares there,
    or to their total time alone.  A native reference (PyTorch) runs the applications as
    their own eager modules and the network as a TorchScript program: other executors,
    whose class shares describe themselves more than the workload (googlenet-mini spent
    58 % of its PyTorch batch-1 time pooling, a few % on ONNX Runtime; densenet121-mini 25 %
    in BatchNorm).  Fitted to those shares as well, the zoo set's network met neither
    engine's (predicted divergence 0.53 there) and read ONNX Runtime up to 31 % low; its
    time there, the speed ratio the score predicts, is what such a reference is for."""
    from dlbench.harness.synth.workload import Reference

    return [not Reference.from_json(r).native for r in workload["references"]]


def worst_divergence(
    predicted: list[dict[str, float]], targets: list[dict[str, float]], fitted: list[bool]
) -> float:
    """The self-check's figure: the largest class divergence over the references whose
    shares are fitted (``shares_fitted``)."""
    return max((divergence(p, t) for p, t, f in zip(predicted, targets, fitted) if f), default=0.0)


def judged(worst: float, misses: list[float], ratio_weight: float = RATIO_WEIGHT) -> float:
    """What a network is judged by, its counts as the fit predicts them and its profiles
    and timings as measured alike: the worst reference's class divergence (the self-check)
    plus the speed ratios' misses (the figure validate tests), ``misses`` being each
    reference's time ratio over the score's, less 1."""
    return worst + ratio_weight * float(np.abs(np.log1p(misses)).sum())


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


def solve(
    workload: dict[str, Any],
    owner: list[int],
    costs,
    main,
    budget_us: float,
    near: tuple[np.ndarray, float] | None = None,
    ratio_weight: float = RATIO_WEIGHT,
) -> tuple[np.ndarray, list[dict[str, float]], list[dict[str, float]]]:
    """Integer counts per unit; the target and the predicted µs per class on each reference.
    ``near``: counts to start from and the most of their time, on any reference, that the
    search may move (a local refit, on costs measured in those counts' own network,
    which hold only near it); ``ratio_weight`` as ``judged``."""
    from dlbench.harness.synth.fit import integer_counts, nnls
    from dlbench.harness.synth.workload import Reference, matched

    contrib = contributions(workload) * budget_us
    same = matched([Reference.from_json(r) for r in workload["references"]])
    target_classes = [{c: t * budget_us for c, t in mix.items()} for mix in class_targets(workload)]
    names = sorted({c for t in target_classes for c in t} | {c for ref in costs for u in ref for c in u})
    refs, k = len(target_classes), len(main[0])
    fitted_refs = shares_fitted(workload)
    rows, targets, weights = [], [], []
    for r in range(refs):
        scale = 1.0 / (sum(target_classes[r].values()) or 1.0)
        if not fitted_refs[r]:  # its total time alone
            rows.append([sum(costs[r][j].values()) for j in range(k)])
            targets.append(sum(target_classes[r].values()))
            weights.append(scale)
            continue
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
    goal = np.array([[t.get(c, 0.0) for c in names] for t in target_classes])  # [refs, classes]
    shares = goal / np.where(goal.sum(axis=1) > 0, goal.sum(axis=1), 1.0)[:, None]
    aimed = np.log(goal.sum(axis=1)[1:] / goal[0].sum())[:, None] if refs > 1 else np.zeros((0, 1))
    fitted = float(np.sum(b**2)) or 1.0
    per_unit = spent.sum(axis=1)  # [refs, units]: a unit's µs on each reference
    start_time = per_unit @ near[0] if near is not None else None  # [refs]

    def errors(n: np.ndarray) -> np.ndarray:
        """What the self-check judges (the worst class divergence of the references whose
        shares are fitted); how far the network's time on each reference, relative to the
        first, is from the mix's (the speed ratio between references, which is what the
        score predicts); and the least-squares residual, relative, to keep the cluster
        mix and the time scale.  ``n``: candidate counts [m, k]; one error each."""
        per_class = np.einsum("rcj,mj->rcm", spent, n)
        times = per_class.sum(axis=1)  # [refs, m]
        worst = 0.5 * np.abs(per_class / np.where(times > 0, times, 1.0)[:, None, :] - shares[:, :, None])
        with np.errstate(divide="ignore"):
            ratios = np.abs(np.log(np.maximum(times[1:], 1e-12) / times[0]) - aimed).sum(axis=0)
        residual = 0.1 * np.sum((n @ a.T - b) ** 2, axis=1) / fitted
        checked = worst.sum(axis=1)[np.array(fitted_refs)]
        total = (checked.max(axis=0) if len(checked) else 0.0) + ratio_weight * ratios + residual
        if near is not None:
            moved = np.abs(n - near[0]) @ per_unit.T / start_time  # [m, refs]
            total = np.where(moved.max(axis=1) > near[1], np.inf, total)
        return np.where(times[0] > 0, total, np.inf)

    start = integer_counts(a, b, nnls(a, b)) if near is None else near[0]
    counts = integer_counts(a, b, start, errors=errors)
    predicted = [{c: float(v) for c, v in zip(names, spent[r] @ counts)} for r in range(refs)]
    return counts, target_classes, predicted


def _tv(p: np.ndarray, q: np.ndarray) -> float:
    """``divergence`` on aligned arrays: the form the integer search evaluates often."""
    return 0.5 * float(np.abs(p / (p.sum() or 1.0) - q / (q.sum() or 1.0)).sum())


def fit_budget(
    workload,
    owner,
    costs,
    main,
    budget_us: float,
    ceiling_us: float = math.inf,
    curve: list[tuple[float, float]] | None = None,
    ratio_weight: float = RATIO_WEIGHT,
):
    """Counts for the smallest budget (µs on the first reference), from ``budget_us``
    doubling up to ``ceiling_us`` or the network's applications' own time, whose predicted
    class shares pass the self-check; where none does (a class no unit reproduces), the
    smallest within 0.01 of the best divergence seen.  Returns the counts, the budget
    used, the targets and the prediction; ``curve`` gathers each budget tried with its
    predicted divergence (the worst fitted reference's), so the output can say why it grew."""
    from dlbench.harness.synth.workload import set_ms

    top = min(set_ms(workload["applications"], 0) * 1000, ceiling_us)
    fitted = shares_fitted(workload)
    tried = []
    used = min(budget_us, top)
    while True:
        counts, targets, predicted = solve(workload, owner, costs, main, used, ratio_weight=ratio_weight)
        worst = worst_divergence(predicted, targets, fitted)
        tried.append((worst, used, counts, targets, predicted))
        if curve is not None:
            curve.append((used, worst))
        if worst <= DIVERGENCE_LIMIT or used >= top:
            break
        used = min(top, used * 2)
    best = min(t[0] for t in tried)
    worst, used, counts, targets, predicted = next(
        t for t in tried if t[0] <= max(best + 0.01, DIVERGENCE_LIMIT)
    )
    return counts, used, targets, predicted


def unit_costs(
    units: list[Unit], profiles: list[dict[str, Any]], counts: list[int]
) -> tuple[list[list[dict[str, float]]], list[list[float]]]:
    """Per reference and unit: the µs per instance its nodes take by class (bridges and the
    reorders that ran after it included), and the µs of its own op's class; a unit that
    did not run (count 0) has none.  A node is a unit's by its name, or by the source
    layer it was made of where a runtime named it, or by the layer that fed it where it
    was made of none (OpenVINO's ``LSTMSequence_41761``, which the plugin ran after
    another lane's convolution); else it is the unit's that ran before it."""
    from dlbench.harness.profile.classes import node_class

    by_class: list[list[dict[str, float]]] = []
    main: list[list[float]] = []
    for prof in profiles:
        classes: list[dict[str, float]] = [{} for _ in units]
        own = [0.0] * len(units)
        current = None
        for n in sorted(prof["nodes"], key=lambda n: n.get("at", 0)):
            found = _named_unit(n)
            current = found if found is not None else current
            if current is None or current >= len(units) or not counts[current]:
                continue
            cls = node_class(n)
            classes[current][cls] = classes[current].get(cls, 0.0) + n["us"] / counts[current]
            if cls == units[current].cls:
                own[current] += n["us"] / counts[current]
        by_class.append(classes)
        main.append(own)
    return by_class, main


def _named_unit(node: dict[str, Any]) -> int | None:
    """The unit a profiled node names: by its own name, its source layer, or what fed it."""
    for key in ("node", "source", "fed_by"):
        if found := _INSTANCE.search(node.get(key) or ""):
            return int(found.group(1))
    return None


def pooled(measured: list[tuple[int, dict[str, float], float]]) -> tuple[dict[str, float], float]:
    """A unit's cost by class and of its own class over the networks it ran in, each
    weighted by its instances there."""
    total = sum(n for n, _, _ in measured)
    classes: dict[str, float] = {}
    for n, by_class, _ in measured:
        for c, us in by_class.items():
            classes[c] = classes.get(c, 0.0) + n * us / total
    return classes, sum(n * own for n, _, own in measured) / total


def scaled(profile: dict[str, Any], ms: float) -> dict[str, Any]:
    """``profile`` with every node's time scaled so that they sum to ``ms`` a run."""
    k = ms / profile["node_ms_per_run"] if profile["node_ms_per_run"] > 0 else 1.0
    nodes = [{**n, "us": n["us"] * k} for n in profile["nodes"]]
    return {**profile, "nodes": nodes, "node_ms_per_run": ms}
