"""Validate's rounds: the matrix run more than once, and what its repeats say about noise.

A validation on a 2-core machine runs for most of an hour, and the machine's speed moves
under it (the zoo set's resnet50-mini read 3,618 samples/s in one run and 1,839 an hour
later).  Every score is a ratio against one baseline configuration, timed once, at one
moment: a drift over the run, or one pause, moves whole predictors.  So the matrix runs in
rounds, each in the reverse order of the one before (A B C, C B A: a configuration early
in one round is late in the next, so a steady drift meets every configuration alike in
their mean), and each cell's figure is its rounds' median.  The rounds also measure the
noise the verdict carries: how far one configuration's applications' score lands from one
round to the next, which is the floor a "which is faster" verdict must rise above.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dlbench.harness.stats import percentile, range_over_median

T = TypeVar("T")


def in_order(items: Sequence[T], number: int) -> list[T]:
    """``items`` in the order round ``number`` (from 1) runs them: every second one backwards."""
    return list(items)[::-1] if number % 2 == 0 else list(items)


def ordered(jobs: Sequence[T], rounds: int) -> list[list[T]]:
    """The jobs of each round: forwards, backwards, forwards..."""
    return [in_order(jobs, r) for r in range(1, rounds + 1)]


def interleaved(slots: Sequence[T], processes: dict[T, int]) -> list[T]:
    """The order one block of the matrix runs its processes in: each of ``slots`` (the
    applications) once, and each network of ``processes`` that many times, spread evenly
    among them (networks with as many processes taking turns), so that a predictor is
    timed through the same minutes as the score it predicts.  The machine's speed moves
    in spells of minutes: in one zoo validation seven of ten applications ran one block
    at 0.12 to 0.45 of their speed in the next round, while the synthetic network, timed
    after them, read 0.91 of its own."""
    placed: list[list[T]] = [[s] for s in slots] or [[]]
    by_count: dict[int, list[T]] = {}
    for network, n in processes.items():
        by_count.setdefault(n, []).append(network)
    for n, networks in by_count.items():
        stream = [x for _ in range(n) for x in networks]
        for j, x in enumerate(stream):
            placed[int((j + 0.5) * len(placed) / len(stream))].append(x)
    return [x for slot in placed for x in slot]


def stop_rule(min_duration: float = 0.5) -> Any:
    """How long a predictor's or a fitted network's process times it: ``min_duration``
    seconds after at least three warm-up runs."""
    from dlbench.harness.bench.measure import StopRule

    return StopRule(min_duration_s=min_duration, warmup=3, max_warmup=30)


def timed_in_turn(
    jobs: Sequence[Sequence[str]],
    refs: Sequence[Any],
    processes: int,
    db: str,
    timeout: float | None = None,
    options: dict[str, Any] | None = None,
    shapes: Sequence[Sequence[dict[str, tuple[int, ...]]]] | None = None,
) -> list[list[float]]:
    """Per job (``jobs[j][i]``: the file that runs ``refs[i]``) and reference, ms per run:
    the median of ``processes`` bench processes on each reference's backend (with its own
    of ``options``, bench's -O), each round every job on
    every reference in turn, backwards every second round.  One process's speed moves 10
    to 20 % on a small machine, and it moves in spells: a network chosen among others on
    one process a reference is the one whose measurements were luckiest (the zoo set's
    kept network read 7.7 ms at its first reference once, then 9.2 to 11.2 ms in seven
    profiles), and an application timed three times in a row at one reference read
    googlenet-mini's batch-8 run twice as slow as validate found it; in turn, a slow spell
    meets one of a job's processes, not all.  ``timeout``: seconds a process; one that
    fails fails the step, as a failed profile does.  ``shapes[j][i]``: the inputs' shapes
    of a file whose format records none (a network's TorchScript version)."""
    from dlbench.harness.backends import get_backend
    from dlbench.harness.bench.execute import run_bench
    from dlbench.harness.bench.request import BenchRequest
    from dlbench.harness.synth import ProfileFailed

    got: list[list[list[float]]] = [[[] for _ in refs] for _ in jobs]
    cells = [(j, r) for j in range(len(jobs)) for r in range(len(refs))]
    for number in range(1, processes + 1):
        for j, r in in_order(cells, number):
            ref, file = refs[r], jobs[j][r]
            req = BenchRequest(
                artifacts=[file],
                backends=[ref.runs_on],
                options=get_backend(ref.runs_on).own_options(options or {}),
                batch_sizes=[ref.batch],
                threads=[ref.threads] if ref.threads else None,
                rule=stop_rule(),
                timeout=timeout,
                db=db,
                shapes=dict(shapes[j][r]) if shapes else {},
            )
            for record in run_bench(req, show_progress=False):
                if record["status"] not in ("ok", "unstable") or not record.get("throughput_sps"):
                    why = record.get("error")
                    raise ProfileFailed(f"{file}: its timing at {ref.label} failed: {why}")
                got[j][r].append(ref.batch * 1000 / record["throughput_sps"])
    return [[statistics.median(v) for v in job] for job in got]


def medians(raw: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Each cell's figure: the median of its rounds (those it ran in)."""
    return {c: {a: statistics.median(v) for a, v in got.items() if v} for c, got in raw.items()}


def noise(
    raw: dict[str, dict[str, list[float]]],
    configs: list[str],
    score: Callable[[dict[str, dict[str, float]]], dict[str, float]],
) -> dict[str, Any] | None:
    """How far the rounds land apart: per cell (each artifact's throughput), and per
    configuration of ``configs`` (the first the baseline): the applications' ``score``
    (results -> {configuration: score}) against the baseline timed in the same round, so
    the baseline's own noise counts.  None without two rounds to compare."""
    rounds = max((len(v) for c in configs for v in raw[c].values()), default=0)
    cells = sorted(range_over_median(v) for c in configs for v in raw[c].values() if len(v) > 1)
    if rounds < 2 or len(configs) < 2 or not cells:
        return None
    by_config: dict[str, list[float]] = {c: [] for c in configs[1:]}
    for r in range(rounds):
        actual = score({c: {a: v[r] for a, v in raw[c].items() if len(v) > r} for c in configs})
        if configs[0] in actual:  # a round without the baseline has no ratios to give
            for c in by_config:
                if c in actual:
                    by_config[c].append(actual[c])
    scored = {c: range_over_median(v) for c, v in by_config.items() if len(v) > 1}
    if not scored:
        return None
    values = sorted(scored.values())
    return {
        "rounds": rounds,
        "cell_spread": {"median": statistics.median(cells), "p90": percentile(cells, 90)},
        "score_spread": {"median": statistics.median(values), "p90": percentile(values, 90)},
        "score_spread_by_configuration": scored,
    }
