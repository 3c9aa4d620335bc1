"""Successive halving over fresh-process bench cells, inside a wall-time budget.

Each point is one ``run_bench`` cell, so it is measured exactly as ``dlbench bench``
measures (its own process, warm-up, stop rule); what changes between rungs is only the
stop rule's ``--min-duration``.  Rung 0 measures many points briefly, and each next rung
keeps the best 1/ETA of them (per objective) and measures them ETA times longer: a point
a short measurement already ruled out never gets a long one.  The default point is kept
in every rung, so the final default-versus-best comparison is made at the same length.

The last rung, which picks the winner among a few close points, does not lengthen the
window: it measures each of its points ETA times, in fresh processes taken in turn, and
ranks them by the median.  What separates the last few points is a few per cent, and on
a 2-core machine two fresh processes of one point differ by that much however long each
measures, so one cell per point left the pick to one process's luck.  Taking turns makes
drift hit all alike, and a budget that ends the rung early has still measured every
point once.

The best point is then measured once more: the median that won is the highest of
several, and stored as the tuned figure it would read a few per cent high, which every
bench row's "vs tuned" and ``bench --config`` would then fall short of.  A measurement
taken after the choice is free of that selection.  It measures as bench does by default
(its window, warm-up and minimum) where the time left allows, which a search that ends
early mostly leaves; the plan only reserves one more turn at the last rung's window.

Rung 0 is sized from the budget as it goes, each cell saying what a cell costs beyond
its measured window (process start, load, warm-up): it takes the one-factor points first
(what each setting is worth on its own, which also ranks the effects), then the points
one setting away from the best of those, then random points, while the time left covers
the later rungs of its size; points made of the best moves around that leader join
rung 1.  Before each cell the remaining budget is
checked, so the search ends within it, keeping what the rungs so far measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.output.progress import clock
from dlbench.harness.tune.rungs import FIRST_RUNG_S, later_rungs, plan_cost, rung_count
from dlbench.harness.tune.space import ALLOCATOR, BATCH, BUILD, INTER_OP, THREADS, Point, Space, key

BENCH = StopRule()  # how bench measures by default: the best's figure where time allows
STOP_AT = 0.95  # of the budget: the record, the configs and the table come after
MAX_POINTS = 4096  # rung 0's pool: a larger space is sampled


@dataclass
class Measured:
    point: Point
    rung: int
    record: dict[str, Any] | None = None
    error: str | None = None
    # Why the point is in its rung: "sampled" (rung 0), "kept" (among the best of the
    # rung before), "combined" (one-factor gains put together) or "default".
    why: str = "sampled"
    repeat: int = 0  # which of the last rung's fresh processes of the point
    bench_rule: bool = False  # measured as bench measures by default (the best, at the end)

    def ok(self) -> bool:
        return self.record is not None and self.record["status"] != "failed"

    def throughput(self) -> float | None:
        return self.record.get("throughput_sps") if self.ok() and self.record else None

    def p99(self) -> float | None:
        if not self.ok() or self.record is None:
            return None
        return (self.record.get("latency_ms") or {}).get("p99")


@dataclass
class Search:
    """What ``run_search`` found: every measurement, per point its latest (longest) one."""

    space: Space
    runs: list[Measured] = field(default_factory=list)
    rungs: int = 0
    stopped_early: bool = False
    plan: str = ""
    # Each objective's best measured once more after the choice, by point.
    confirmed: dict[tuple, Measured] = field(default_factory=dict)

    def at_rung(self, rung: int) -> list[Measured]:
        return [m for m in self.runs if m.rung == rung]

    def at(self, point: Point, rung: int, objective: str, max_p99_ms: float | None) -> Measured | None:
        """``point``'s figure at ``rung`` (its median repeat there), else at its longest rung."""
        mine = [m for m in self.runs if key(m.point) == key(point)]
        there = [m for m in mine if m.rung == rung] or [m for m in mine if m.rung == mine[-1].rung]
        return pooled(there, objective, max_p99_ms)[0] if there else None

    def winner(
        self, objective: str, max_p99_ms: float | None, precision: str | None = None
    ) -> Measured | None:
        """The best point of the longest rung that has one for ``objective`` (at
        ``precision``): a brief measurement's lucky figure never outranks a long one."""
        for rung in range(max((m.rung for m in self.runs), default=-1), -1, -1):
            at = [
                m
                for m in self.at_rung(rung)
                if precision is None or (m.record or {}).get("precision") == precision
            ]
            top = best(pooled(at, objective, max_p99_ms), objective, max_p99_ms)
            if top is not None:
                again = self.confirmed.get(key(top.point))
                return again if again is not None and score(again, objective, max_p99_ms) is not None else top
        return None


def score(m: Measured, objective: str, max_p99_ms: float | None) -> float | None:
    """Higher is better; None where the point does not count for the objective."""
    if not m.ok():
        return None
    if objective == "latency":
        p99 = m.p99()
        return None if p99 is None or m.point.get(BATCH, 1) != 1 else -p99
    p99, thr = m.p99(), m.throughput()
    if thr is None or (max_p99_ms is not None and (p99 is None or p99 > max_p99_ms)):
        return None
    return thr


def pooled(measured: list[Measured], objective: str, max_p99_ms: float | None) -> list[Measured]:
    """One measurement per point, in first-seen order: of a point measured more than once
    (the last rung's repeats), the one with the median score, the lower of the two middle
    ones for an even count and a repeat that failed or missed the bound counting lowest, so
    a point that is fast once and fails once does not win."""
    groups: dict[tuple, list[Measured]] = {}
    for m in measured:
        groups.setdefault(key(m.point), []).append(m)
    out = []
    for ms in groups.values():
        figures = [score(m, objective, max_p99_ms) for m in ms]
        ranked = sorted(zip(figures, ms), key=lambda fm: -math.inf if fm[0] is None else fm[0])
        out.append(ranked[(len(ranked) - 1) // 2][1])
    return out


def best(measured: list[Measured], objective: str, max_p99_ms: float | None) -> Measured | None:
    scored = [(score(m, objective, max_p99_ms), m) for m in measured]
    ranked = [(s, m) for s, m in scored if s is not None]
    return max(ranked, key=lambda sm: sm[0])[1] if ranked else None


def keep_best(
    measured: list[Measured], n: int, objectives: list[str], max_p99_ms: float | None
) -> list[Point]:
    """The points of the top ``n`` per objective (union), in ranking order."""
    out: dict[tuple, Point] = {}
    for objective in objectives:
        scored = [(score(m, objective, max_p99_ms), m) for m in measured]
        ranked = sorted(((s, m) for s, m in scored if s is not None), key=lambda sm: -sm[0])
        for _, m in ranked[:n]:
            out.setdefault(key(m.point), m.point)
    return list(out.values())


def combined(
    space: Space, rung0: list[Measured], objective: str, max_p99_ms: float | None, base: Point | None = None
) -> list[Point]:
    """The settings' one-factor gains around ``base`` (rung 0's leader; the default when
    none is given) put together, measured first in rung 1: the two largest, then all of
    them, then all but the smallest and so on, since gains may not combine (OpenVINO's
    streams need threads to share out) and a small budget measures only the first."""
    base = base or space.default()
    by_key = {key(m.point): m for m in rung0}
    reference = by_key.get(key(base))
    top = score(reference, objective, max_p99_ms) if reference else None
    gains: list[tuple[float, str, Any]] = []
    for dim, values in space.dims.items():
        alone = [(by_key.get(key({**base, dim: v})), v) for v in values if v != base[dim]]
        scored = [(score(m, objective, max_p99_ms), v) for m, v in alone if m is not None]
        ranked = sorted(((s, v) for s, v in scored if s is not None), key=lambda sv: -sv[0])
        if ranked and (top is None or ranked[0][0] > top):
            gains.append((ranked[0][0], dim, ranked[0][1]))
    gains.sort(key=lambda g: -g[0])
    sizes = dict.fromkeys([2, *range(len(gains), 2, -1)]) if len(gains) > 1 else {}
    return [{**base, **{dim: v for _, dim, v in gains[:k]}} for k in sizes]


def bench_request(
    artifact: str,
    space: Space,
    p: Point,
    device: str,
    rule: StopRule,
    db: str | None,
    seed: int,
    timeout: float | None,
) -> BenchRequest:
    """The bench cell of a point: the same request ``bench --config`` rebuilds."""
    options = space.backend.own_options(p)
    return BenchRequest(
        artifacts=[artifact],
        backends=[space.backend.name],
        devices=[device],
        batch_sizes=[int(p.get(BATCH, 1))],
        threads=[int(p[THREADS])] if THREADS in p else None,
        inter_op_threads=int(p[INTER_OP]) if INTER_OP in p else None,
        allocator=p.get(ALLOCATOR, DEFAULT_ALLOCATOR),
        options=options,
        rule=rule,
        db=db,
        seed=seed,
        timeout=timeout,
    )


def run_search(
    space: Space,
    artifacts: dict[str, str],
    device: str,
    objectives: list[str],
    max_p99_ms: float | None,
    eta: int,
    budget_s: float,
    db: str,
    seed: int = 0,
    timeout: float | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> Search:
    """Successive halving over ``space`` (``artifacts``: build value -> file) until
    ``budget_s`` seconds from now."""
    from dlbench.harness.bench.execute import run_bench

    start = time.monotonic()
    result = Search(space)
    cost = {"overhead": 3.0}  # seconds a cell takes beyond its window; measured below

    def left() -> float:
        return budget_s * STOP_AT - (time.monotonic() - start)

    def measure(
        p: Point, rung: int, window: float, why: str = "sampled", turn: int = 0, rule: StopRule | None = None
    ) -> Measured | None:
        if left() < cost["overhead"] + window:
            result.stopped_early = True
            return None
        rule = rule or StopRule(warmup=3, min_iterations=5, min_duration_s=window)
        art = artifacts[p.get(BUILD, next(iter(artifacts)))]
        t0 = time.monotonic()
        try:
            recs = run_bench(
                bench_request(art, space, p, device, rule, db, seed, timeout), show_progress=False
            )
            m = Measured(p, rung, record=recs[0], error=recs[0].get("error"), why=why, repeat=turn)
        except UserError as exc:  # a combination the backend refuses: not a candidate
            m = Measured(p, rung, error=str(exc), why=why, repeat=turn)
        m.bench_rule = rule is BENCH
        wall = time.monotonic() - t0
        if m.ok() and rule is not BENCH:  # bench's own warm-up and minimum are not a rung's
            cost["overhead"] = max(0.2, wall - window)
        if why == "confirmed":  # not one of the turns the choice was made on: kept apart
            result.confirmed[key(p)] = m
        else:
            result.runs.append(m)
        done = len(result.runs) + len(result.confirmed)
        eta_s = max(0.0, left())
        shown = ", ".join(f"{k}={v}" for k, v in p.items() if v != space.default()[k]) or "defaults"
        figure = f"{m.throughput():.4g} samples/s, p99 {m.p99():.3g} ms" if m.ok() else f"FAILED: {m.error}"
        turn_shown = f", turn {turn + 1}" if turn else ""
        say(
            f"[rung {rung}, {window:g} s{turn_shown}, cell {done}] {space.backend.name} {shown}: {figure} "
            f"(elapsed {clock(time.monotonic() - start)}, at most {clock(eta_s)} left)"
        )
        return m

    base = space.default()
    first = measure(base, 0, FIRST_RUNG_S, "default")
    if first is None:
        return result
    # Rung 0: every one-factor point the budget allows, then the points one setting away
    # from the leader so far, then random points, while what is left covers the later rungs
    # of its size (a cell's cost re-estimated after each: the first cell's includes one-off
    # costs).  A setting's worth depends on where it is tried (on lstm-tiny one thread won
    # at batch 1 and lost at 16, the batch that won), so rung 1 combines the gains around
    # the leader, not around the default.
    # The pool holds the one-factor points first (Space.sample), so the first point beyond
    # them is where the leader is known and its neighbours go ahead of the rest.
    pool = space.sample(min(space.size(), MAX_POINTS), seed)
    alone = {key(p) for p in space.one_factor()}
    leaders: dict[str, Point] = {}
    looked_around = False
    seen = {key(base)}
    queue = [p for p in pool if key(p) != key(base)]
    while queue:
        p = queue.pop(0)
        if key(p) in seen:
            continue
        if key(p) not in alone and not looked_around:
            looked_around = True
            for o in objectives:
                top = best(result.at_rung(0), o, max_p99_ms)
                if top is not None and key(top.point) != key(base):
                    leaders[o] = top.point
            around = [q for lead in leaders.values() for q in space.neighbours(lead)]
            alone |= {key(q) for q in around}  # what rung 1 combines: measured like the first
            queue = around + [p, *queue]
            continue
        n = len(result.at_rung(0)) + 1
        later = later_rungs(n, cost["overhead"], eta, len(objectives))
        if key(p) not in alone and left() < cost["overhead"] + FIRST_RUNG_S + later:
            break
        seen.add(key(p))
        if measure(p, 0, FIRST_RUNG_S) is None:
            break
    # As many rungs as the time left covers (a rung 0 of one-factor points alone may
    # already be more than a short budget's halving can go through): fewer rungs leave
    # more points to the last, which measures each of them in turns.
    n0 = len(result.at_rung(0))
    rungs = rung_count(n0, eta)
    while rungs > 1 and plan_cost(n0, rungs, cost["overhead"], eta, len(objectives)) > left():
        rungs -= 1
    result.plan = (
        f"{len(result.at_rung(0))} of {space.size()} points in rung 0, up to {rungs + 1} rungs "
        f"(a cell costs {cost['overhead']:.1f} s besides its window)"
    )
    say(f"{space.backend.name}: {result.plan}")
    result.rungs = 1
    current = result.at_rung(0)
    window = FIRST_RUNG_S
    for rung in range(1, rungs + 1):
        n = max(1, math.ceil(len(current) / eta))
        survivors = keep_best(current, n, objectives, max_p99_ms)
        # The combined points (rung 1), the leader, then the default: a rung the budget cuts
        # short has still measured the likeliest best and the reference.
        lead = (
            [p for o in objectives for p in combined(space, current, o, max_p99_ms, leaders.get(o))]
            if rung == 1
            else []
        )
        why = {key(p): "kept" for p in survivors} | {key(p): "combined" for p in lead}
        candidates = set(why)
        why[key(base)] = "default"
        survivors = list({key(p): p for p in [*lead, *survivors[:1], base, *survivors[1:]]}.values())
        if len(survivors) < 2 and rung > 1:
            break
        last = rung == rungs or len(survivors) <= 2
        if not last:
            window *= eta
        # The last rung: ETA turns over its candidates at the window of the rung before
        # (the same measured time as one window ETA times longer); the default, when it is
        # only the table's reference and not a candidate, once.
        again = [p for p in survivors if key(p) in candidates]
        turns = [survivors, *[again] * (eta - 1)] if last else [survivors]
        measured = [
            m
            for turn, points in enumerate(turns)
            for m in (measure(p, rung, window, why[key(p)], turn) for p in points)
            if m is not None
        ]
        if not measured:
            break
        result.rungs = rung + 1
        current = measured
        if result.stopped_early or last:
            break
    # Each objective's best once more after the choice, kept apart from the turns.
    bests = [top.point for o in objectives if (top := result.winner(o, max_p99_ms)) is not None]
    for p in {key(q): q for q in bests}.values():
        # bench's own rule where the time left covers it with a cell's cost to spare (its
        # warm-up and minimum iterations are more than a rung's), else one more turn.
        if left() >= 2 * cost["overhead"] + BENCH.min_duration_s:
            m = measure(p, result.rungs - 1, BENCH.min_duration_s, "confirmed", eta, BENCH)
        else:
            m = measure(p, result.rungs - 1, window, "confirmed", eta)
        if m is None:
            break
    return result
