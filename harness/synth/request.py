"""What ``dlbench synth profile|generate|validate`` ask for.  Each field a flag sets
declares it (``core.flags``): the three parsers come from here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlbench.core.flags import comma_list, field_of, flag, split
from dlbench.harness.store.context import DB
from dlbench.harness.synth import RATIO_WEIGHT
from dlbench.harness.synth.workload import DEFAULT_REFERENCES

ALL = "all"


def threads_list(text: str) -> list[int]:
    """``1,all``: thread counts, 'all' every physical core (bench's default)."""
    from dlbench.harness.cells.threads import usable_cores

    return [usable_cores() if t.strip() == ALL else int(t) for t in text.split(",")]


@dataclass(kw_only=True)
class ProfileRuns:
    """How each profile cell runs, and how often a profiled model is timed: both steps that
    profile take these."""

    warmup: int = flag("--warmup", default=5, type=int, help="runs before profiling (default {default})")
    iterations: int = flag("--iterations", default=20, type=int, help="profiled runs (default {default})")
    timeout: float | None = flag("--timeout", default=None, type=float, help="seconds per profile cell")
    timings: int = flag(
        "--timings",
        default=3,
        type=int,
        help="bench processes that time each profiled model (an application; a fitted network) on "
        "every reference, the references in turn: the ratios of their median are the score's and "
        "the network's, as validate measures them (0: the profiles' own times; default {default})",
    )


@dataclass(kw_only=True)
class SynthProfileRequest(ProfileRuns):
    applications: list[str] = flag(
        "applications",
        many=True,
        metavar="MODEL.onnx[=WEIGHT]",
        help="the applications the synthetic network stands for: ONNX files, each with an "
        "optional weight in the score (default 1)",
    )
    references: list[str] = flag(
        "--reference",
        factory=lambda: [r.text for r in DEFAULT_REFERENCES],
        many=True,
        read=split,
        help="reference configurations BATCHxTHREADS[:BUILD][@BACKEND], at least two like the first "
        "of different batch sizes; a BUILD (int8, fp16) profiles the applications' builds, a BACKEND "
        "(openvino) profiles them there, pytorch by their names and the network as its PyTorch version "
        "(fitted to their total time there; never the first); repeat or comma-separate (default {default})",
    )
    out: str = flag(
        "--out", "-o", default="synth/workload.json", help="the workload file (default {default})"
    )
    # Each backend's options for every profile and timing it runs (bench's -O), kept in the
    # workload: the generator profiles its networks with them too.
    options: dict[str, Any] = field(default_factory=dict)
    # Each application's profile is stored like any (kind profile): the report shows them.
    db: str | None = field_of(DB, default=None)


@dataclass(kw_only=True)
class SynthGenerateRequest(ProfileRuns):
    workload: str = flag("workload", metavar="WORKLOAD.json", help="dlbench synth profile's output")
    out: str = flag(
        "--out",
        "-o",
        default="synth/synthetic.onnx",
        help="the network (numbered, synthetic-1.onnx, ..., where there are several); their "
        "description beside it (.json)",
    )
    networks: int = flag(
        "--networks",
        default=1,
        type=int,
        help="networks at most, each timed on its own for a group of applications that responded "
        "alike to the references; the score is their weighted geometric mean (default {default})",
    )
    clusters: int = flag(
        "--clusters",
        default=24,
        type=int,
        help="representatives over all op classes, shared among the networks by their weights "
        "(default {default})",
    )
    budget: float = flag(
        "--budget",
        default=0.1,
        type=float,
        help="the benchmark's run time as a fraction of the whole application set's, on the "
        "first reference, shared among the networks by weight; a network's share is doubled "
        "until its time shares are met (default {default})",
    )
    max_budget: float = flag(
        "--max-budget",
        default=1.0,
        type=float,
        help="the most the doubling may reach, as the same fraction: the run time the benchmark "
        "may take, whatever the time shares (default {default})",
    )
    refits: int = flag(
        "--refits",
        default=3,
        type=int,
        help="fits after the first on the costs of its units measured in the networks fitted "
        "before, pooled (default {default})",
    )
    local_refits: int = flag(
        "--local-refits",
        default=4,
        type=int,
        help="then fits near the closest network so far, on the costs measured in it, moving a "
        "bounded share of its time; the closest fits are timed again with the applications "
        "for the one kept (default {default})",
    )
    ratio_weight: float = flag(
        "--ratio-weight",
        default=RATIO_WEIGHT,
        type=float,
        help="how much each reference's speed ratio counts beside the class time shares, in the "
        "fit and in the choice of the network kept: a network's error is its worst class-share "
        "divergence plus this times the summed |log| of its time ratios over the score's "
        "(default {default})",
    )
    seed: int = flag("--seed", default=0, type=int, help="seed of the weights (default {default})")


@dataclass
class SynthValidateRequest:
    network: str = flag("network", metavar="SYNTHETIC.json", help="dlbench synth generate's description")
    backends: list[str] = flag(
        "--backends",
        factory=lambda: ["onnxruntime", "openvino"],
        type=comma_list(str),
        help="backends of the matrix, those not available here left out (default {default})",
    )
    builds: list[str] = flag(
        "--builds", factory=lambda: ["fp32", "int8", "fp16"], type=comma_list(str), help="default {default}"
    )
    batch_sizes: list[int] = flag(
        "--batch-sizes", factory=lambda: [1, 8, 32], type=comma_list(int), help="default {default}"
    )
    threads: list[int] = flag(
        "--threads", factory=lambda: threads_list("1,all"), type=threads_list, help="default 1,all"
    )
    allocators: list[str] = flag(
        "--allocators", factory=lambda: ["tuned", "system"], type=comma_list(str), help="default {default}"
    )
    envs: list[str] = flag(
        "--with",
        factory=list,
        many=True,
        metavar="PACKAGE==VERSION",
        help="a library environment of the matrix besides the installed one (bench's --with); repeatable",
    )
    min_duration: float = flag(
        "--min-duration",
        default=0.5,
        type=float,
        help="seconds measured per cell at least (default {default})",
    )
    rounds: int = flag(
        "--rounds",
        default=2,
        type=int,
        help="times the matrix runs, each round in the reverse order of the one before; a cell's "
        "figure is its rounds' median, and how far the rounds land apart is the noise floor of the "
        "pairwise verdicts (default {default})",
    )
    repeats: int | None = flag(
        "--repeats",
        default=None,
        type=int,
        help="processes each cell of a predictor's networks (the synthetic networks, the micro "
        "cells, the replays, a --baseline) runs in a round, taking turns with the applications', "
        "its figure their median (default: as many, over the predictor's networks, as the set has "
        "applications, so a prediction rests on as many processes as the score it predicts)",
    )
    baselines: list[str] = flag(
        "--baseline",
        factory=list,
        many=True,
        metavar="MODEL",
        help="a model outside the set scored as a predictor on its own (ResNet-50, say): an ONNX "
        "file or a model by name; repeatable",
    )
    out: str | None = flag("--out", "-o", default=None, help="the validation (default: beside the network)")
    # Each backend's options for every cell it runs (bench's -O): generated apart, as bench's.
    options: dict[str, Any] = field(default_factory=dict)
    # Every cell of the matrix is stored like any bench cell.
    db: str | None = field_of(DB, default=None)
