"""The comparison itself: pair the two sides' cells, then judge each pair."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.compare.match import FOLLOWS, pair_cells
from dlbench.harness.compare.samples import ITERATIONS, PROCESSES, process_samples, throughput_samples
from dlbench.harness.compare.stats import SLOWER, RatioEstimate, bootstrap_ratio

FAILED, NO_SAMPLES = "failed", "no samples"


@dataclass
class Pair:
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    verdict: str
    estimate: RatioEstimate | None = None
    note: str | None = None
    # What the samples were: "processes" (per-process throughputs of --repeats) or
    # "iterations" (per-iteration throughputs of one process).
    basis: str | None = None

    @property
    def ratio(self) -> float | None:
        return self.estimate.ratio if self.estimate else None

    def to_dict(self) -> dict[str, Any]:
        def side(r):
            return {
                k: r.get(k)
                for k in (
                    "id",
                    "run_id",
                    "status",
                    "model",
                    "framework",
                    "backend",
                    "device",
                    "precision",
                    "batch_size",
                    "scenario",
                    "intra_op_threads",
                    "inter_op_threads",
                    "throughput_sps",
                    "machine_id",
                )
            }

        return {
            "baseline": side(self.baseline),
            "candidate": side(self.candidate),
            "verdict": self.verdict,
            "note": self.note,
            "basis": self.basis,
            "estimate": self.estimate.to_dict() if self.estimate else None,
        }


@dataclass
class Comparison:
    pairs: list[Pair]
    only_baseline: list[dict[str, Any]] = field(default_factory=list)
    only_candidate: list[dict[str, Any]] = field(default_factory=list)
    axes: tuple[str, ...] = ()
    crosses_machines: bool = False

    def regressions(self, percent: float) -> list[Pair]:
        """Pairs that are slower beyond noise and by more than ``percent`` %."""
        return [
            p
            for p in self.pairs
            if p.verdict == SLOWER and p.ratio is not None and p.ratio < 1 - percent / 100
        ]


def judge(
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    min_effect: float = 0.0,
) -> Pair:
    """One pair's verdict.  Both sides with enough ``--repeats`` processes: their
    per-process throughputs are the samples; otherwise both sides' per-iteration ones
    (never one of each: the two spreads are not the same quantity)."""
    pa, pb = process_samples(baseline), process_samples(candidate)
    notes = []
    if pa and pb:
        a, b, why_a, why_b, basis = pa, pb, None, None, PROCESSES
    else:
        a, why_a = throughput_samples(baseline)
        b, why_b = throughput_samples(candidate)
        basis = ITERATIONS
        if pa or pb:
            notes.append(
                f"only the {'baseline' if pa else 'candidate'} has repeated processes: per-iteration samples"
            )
    if a is None or b is None:
        failed = [s for s, why in (("baseline", why_a), ("candidate", why_b)) if why == FAILED]
        if failed:
            return Pair(baseline, candidate, FAILED, note=" and ".join(failed) + " failed")
        notes = [f"{s}: {why}" for s, why in (("baseline", why_a), ("candidate", why_b)) if why]
        return Pair(baseline, candidate, NO_SAMPLES, note="; ".join(notes))
    est = bootstrap_ratio(a, b, confidence=confidence, resamples=resamples, seed=seed, min_effect=min_effect)
    unstable = [
        s for s, r in (("baseline", baseline), ("candidate", candidate)) if r.get("status") == "unstable"
    ]
    if unstable:
        notes.insert(0, " and ".join(unstable) + " unstable")
    return Pair(baseline, candidate, est.verdict, est, "; ".join(notes) or None, basis)


def compare(
    baseline: Iterable[dict[str, Any]],
    candidate: Iterable[dict[str, Any]],
    *,
    axes: Iterable[str] = (),
    allow_different_machines: bool = False,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    min_effect: float = 0.0,
) -> Comparison:
    """Pair the cells of two record sets that differ only along ``axes`` (columns such
    as ``framework``/``backend``), and judge each pair by its throughput samples.

    Raises UserError when the sides share no machine (unless allowed) or no cell.
    """
    baseline, candidate, axes = list(baseline), list(candidate), tuple(axes)
    ignore = (
        axes
        + tuple(f for a in axes for f in FOLLOWS.get(a, ()))
        + (("machine_id",) if allow_different_machines else ())
    )
    machines_a = {r.get("machine_id") for r in baseline}
    machines_b = {r.get("machine_id") for r in candidate}
    if not allow_different_machines and not machines_a & machines_b:
        raise UserError(
            f"baseline and candidate were measured on different machines "
            f"({', '.join(sorted(map(str, machines_a)))} vs "
            f"{', '.join(sorted(map(str, machines_b)))}): pass "
            f"--allow-different-machines to compare them anyway"
        )
    matched, only_a, only_b = pair_cells(baseline, candidate, ignore)
    if not matched:
        raise UserError(
            f"nothing to compare: no cell of the baseline ({len(only_a)}) matches "
            f"one of the candidate ({len(only_b)}) on model, kind, device, "
            f"precision, batch size, scenario and threads"
        )
    pairs = [
        judge(a, b, confidence=confidence, resamples=resamples, seed=seed, min_effect=min_effect)
        for a, b in matched
    ]
    crosses = any(a.get("machine_id") != b.get("machine_id") for a, b in matched)
    return Comparison(pairs, only_a, only_b, axes, crosses)
