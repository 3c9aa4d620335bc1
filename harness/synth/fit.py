"""The generator's two fits: which real shapes stand for the rest, and how often each runs.

k-medoids, not k-means: a representative must be a shape some application really runs
(a centroid of a 3x3 and a 1x1 convolution is a kernel nobody calls), and the points
are weighted by the time they take, so the heavy layers pull the medoids.  Points of
different keys (another op, kernel, stride or a depthwise group: another kernel) are
kept apart by a distance larger than any within a key.

Non-negative least squares (Lawson and Hanson's active set, small enough to write here
rather than pull in a solver) then gives each representative a repetition count whose
measured costs reproduce the target times on every reference configuration at once, and
the counts are rounded to integers by a greedy search on the same weighted error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from dlbench.harness.synth.units import Unit

APART = 1e3  # the distance between points of different keys: beyond any within a key


def distances(points: np.ndarray, keys: list, centres: list[int]) -> np.ndarray:
    """[n, len(centres)]: Euclidean distance, plus ``APART`` across keys."""
    d = np.linalg.norm(points[:, None, :] - points[None, centres, :], axis=-1)
    apart = np.array([[keys[i] != keys[c] for c in centres] for i in range(len(points))], dtype=float)
    return d + APART * apart


def kmedoids(
    points: np.ndarray, weights: np.ndarray, keys: list, k: int, iterations: int = 30
) -> tuple[list[int], np.ndarray]:
    """Weighted k-medoids (alternating assignment and medoid update), seeded by the
    heaviest point and then, greedily, the one whose weighted distance to its nearest
    medoid is largest.  Returns the medoids' indices and each point's cluster."""
    n = len(points)
    k = max(1, min(k, n))
    medoids = [int(np.argmax(weights))]
    while len(medoids) < k:
        near = distances(points, keys, medoids).min(axis=1)
        far = int(np.argmax(weights * near))
        if near[far] == 0:
            break
        medoids.append(far)
    labels = np.zeros(n, dtype=int)
    for _ in range(iterations):
        labels = distances(points, keys, medoids).argmin(axis=1)
        moved = []
        for c in range(len(medoids)):
            members = np.flatnonzero(labels == c)
            inner = distances(points[members], [keys[i] for i in members], list(range(len(members))))
            moved.append(int(members[np.argmin(inner.T @ weights[members])]))
        if moved == medoids:
            break
        medoids = moved
    return medoids, distances(points, keys, medoids).argmin(axis=1)


def nnls(a: np.ndarray, b: np.ndarray, tolerance: float = 1e-10) -> np.ndarray:
    """argmin ||a x - b|| subject to x >= 0 (Lawson and Hanson's active-set method)."""
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    for _ in range(3 * n + 10):
        gradient = a.T @ (b - a @ x)
        candidates = np.flatnonzero(~passive & (gradient > tolerance))
        if not len(candidates):
            break
        passive[candidates[np.argmax(gradient[candidates])]] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            shrinking = passive & (z <= 0)
            step = np.min(x[shrinking] / (x[shrinking] - z[shrinking] + 1e-300))
            x = x + step * (z - x)
            passive &= x > tolerance
            x[~passive] = 0.0
    return x


def integer_counts(
    a: np.ndarray,
    b: np.ndarray,
    x: np.ndarray,
    limit: int = 100_000,
    errors: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """``x`` rounded to non-negative integers, then improved one step at a time (the one
    count up or down by one that lowers the error most) while the error falls.
    ``errors`` maps candidate counts [m, k] to their errors [m] (default ||a n - b||^2):
    every step's 2k candidates are judged in one call, where one call each made a
    network of thousands of instances (a budget near the set's time) take many minutes
    of the generator's own CPU."""
    counts = np.maximum(0, np.rint(x)).astype(int)
    if errors is None:

        def errors(c: np.ndarray) -> np.ndarray:
            return np.sum((c @ a.T - b) ** 2, axis=1)

    k = len(counts)
    moves = np.zeros((2 * k, k), dtype=int)  # each unit's count down, then up
    moves[0::2], moves[1::2] = -np.eye(k, dtype=int), np.eye(k, dtype=int)
    best = float(errors(counts[None, :])[0])
    for _ in range(limit):
        trials = counts + moves
        trials = trials[(trials >= 0).all(axis=1)]
        if not len(trials):
            break
        found = errors(trials)
        i = int(np.argmin(found))  # the first of equals: the lowest unit, down before up
        if found[i] >= best - 1e-15:
            break
        best = float(found[i])
        counts = trials[i]
    return counts


def medoids(workload: dict[str, Any], contrib: np.ndarray, clusters: int) -> tuple[list[Unit], list[int]]:
    """The representatives and, per node, the one that stands for it (-1: none does);
    ``contrib``: each node's time in the weighted mix on each reference
    (``counts.contributions``, which prices the same nodes for the counts)."""
    from dlbench.harness.synth.units import Unit
    from dlbench.harness.synth.workload import Reference, matched

    same = matched([Reference.from_json(r) for r in workload["references"]])
    contrib = contrib[:, same]
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
