"""The fits' final: the closest few timed again, in turn with the applications, and the
one kept judged on those times.  Also how far a network's time ratios are from the
score's, which every fit is judged by."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.harness.synth import RATIO_WEIGHT
from dlbench.harness.synth.counts import judged, scaled

FINALISTS = 4  # the fits timed again, in turn, for the one kept
# How far the score the playoff times may move from the workload's before generate says
# the fits aimed at the wrong one: a quiet re-profile of the zoo set read within 1.5 % of
# its playoff; one timed in a slow spell read 7 to 16 % off it, and every fit on it
# missed the score it was then judged by by 10 to 21 %.
SCORE_MOVED_LIMIT = 0.05


def ratio_misses(ms: list[float], score: np.ndarray) -> list[float]:
    """A network's time on each reference after the first (``ms``), relative to the
    first, over the score's ratio there, less 1."""
    return [float(m / ms[0] / s - 1) for m, s in zip(ms[1:], score)]


def score_moved(profiled: np.ndarray, timed: np.ndarray) -> list[float]:
    """How far the score timed in the playoff is from the workload's, on each reference
    after the first."""
    return [float(t / p - 1) for t, p in zip(timed, profiled)]


def moved_line(moved: list[float] | None, refs: list[str]) -> str | None:
    """A line naming the references (``refs``, after the first) where the score moved
    beyond ``SCORE_MOVED_LIMIT`` (None: none did, or no playoff timed it).  The fits aimed
    at the workload's score, so a move beyond noise means they aimed at a spell, not at
    the applications, and only a profile timed again can say which."""
    beyond = [f"{r} {m:+.1%}" for r, m in zip(refs, moved or []) if abs(m) > SCORE_MOVED_LIMIT]
    if not beyond:
        return None
    return (
        f"the applications' score moved since their profile (beyond {SCORE_MOVED_LIMIT:.0%}): "
        f"{', '.join(beyond)}; the fits aimed at the profile's, so profile them again on a "
        "quiet machine (synth profile) and generate again"
    )


def moved_lines(described: dict[str, Any]) -> list[str | None]:
    """Each network's ``moved_line``, from the description generate writes: what its
    report shows and its status counts."""
    from dlbench.harness.synth.workload import Reference

    refs = [Reference.from_json(r).text for r in described["references"][1:]]
    return [moved_line(n.get("score_moved"), refs) for n in described["networks"]]


def playoff(
    tried: list[dict[str, Any]],
    workload: dict[str, Any],
    refs: list[Any],
    home: Path,
    processes: int,
    timeout: float | None,
    say: Callable[[str], None],
    ratio_weight: float = RATIO_WEIGHT,
) -> tuple[list[dict[str, Any]], np.ndarray, list[list[float]]]:
    """The ``FINALISTS`` fits that came closest, timed again in turn with the
    applications, ``processes`` a reference, and judged again against the score those
    timings give.  Each fit was timed alone, against a score timed an hour before: one
    network's batch-1 processes read 3.1 to 5.6 ms in one run of ten, and the zoo set's
    finalists read their batch-8 ratio 12 % slower, all of them, timed together once
    more (one 38 % slower), so the fit that came closest was the luckiest as often as
    the best.  In turn, a slow spell meets finalists and applications alike.  Returns
    the finalists, the score's ratios and each application's ms on every reference;
    ``ratio_weight`` as ``counts.judged``."""
    from dlbench.harness.synth.groups import score_ratios
    from dlbench.harness.synth.rounds import timed_in_turn
    from dlbench.harness.synth.runs import quiet, run_at

    finalists = sorted(tried, key=lambda t: t["miss"])[:FINALISTS]
    apps = workload["applications"]

    def runs(i: int, app: dict[str, Any]) -> list[str]:
        return [run_at(app["source"], app.get("native"), r, home / f"app-{i}", quiet) for r in refs]

    files = [runs(i, a) for i, a in enumerate(apps)]
    say(f"time the {len(finalists)} closest fits again, in turn with the applications ({processes} each)")
    db = str(home / "timings.sqlite")
    jobs = [*files, *(t["files"] for t in finalists)]
    shapes = [*([{} for _ in refs] for _ in apps), *(t["shapes"] for t in finalists)]
    timed = timed_in_turn(jobs, refs, processes, db, timeout, workload.get("options"), shapes)
    apps_ms = timed[: len(apps)]
    score = score_ratios({**workload, "applications": [{**a, "node_ms": m} for a, m in zip(apps, apps_ms)]})
    for t, ms in zip(finalists, timed[len(apps) :]):
        off = ratio_misses(ms, score)
        # Its profiles and costs carried to these times, as they were to its first ones.
        again = [m / was for m, was in zip(ms, t["ms"])]
        t["profiles"] = [scaled(p, m) for p, m in zip(t["profiles"], ms)]
        t["own"] = [[c * k for c in own] for own, k in zip(t["own"], again)]
        t |= {"ms": ms, "miss": judged(t["fit"]["measured_divergence"], off, ratio_weight)}
        t["fit"]["timed_again"] = off
        say(f"fit {t['fit']['fit']}: time ratios against the score {', '.join(f'{m:+.1%}' for m in off)}")
    return finalists, score, apps_ms
