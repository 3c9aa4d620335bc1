"""``dlbench synth validate``: do the synthetic networks' speed ratios predict the applications'?

Every configuration of the matrix (backend x build x batch x threads x allocator x
library environment) runs every application and the synthetic networks through bench's
own cells (``synth.matrix``).  The applications' score on a configuration is the weighted
geometric mean of their throughputs, each divided by its throughput on the baseline configuration (the
matrix's first); a predictor's score is the same mean over its own artifacts (the
synthetic benchmark's networks by the weight of the applications each stands for).  Relative accuracy
across changes is what is judged, not absolute time (the lesson of the synthetic-proxy
literature):

* Spearman's rank correlation between predicted and actual scores, over all configurations;
* the median and p90 of |predicted / actual - 1|;
* pairwise "which configuration is faster" agreement, counted only over pairs whose
  actual scores differ by more than the noise floor (``dlbench compare``'s);
* the same rank correlation on each backend family held out of the generation (the
  network was fitted to ONNX Runtime's profile; OpenVINO's configurations never were);
* where the matrix spans several backends, every figure again within each one, against
  its own first configuration: the level between engines taken out.

Beside the synthetic networks, the baselines it must beat are scored the same way: each
application alone, and the best two-application subset (chosen with hindsight, so an
upper bound on what picking two models could do).  The score is derived, in MLPerf's
sense, and every report says so.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

from dlbench.harness.stats import percentile
from dlbench.harness.synth.matrix import backend_of

DERIVED = (
    "Derived score (MLPerf's sense): a prediction of the applications' weighted geometric-mean "
    "speed ratio, not a measurement of any application."
)


def complete(results: dict[str, dict[str, float]], artifacts: list[str]) -> list[str]:
    """The configurations on which every one of ``artifacts`` ran."""
    return [c for c, got in results.items() if all(a in got for a in artifacts)]


def scores(
    results: dict[str, dict[str, float]],
    apps: dict[str, float],
    predictors: dict[str, dict[str, float]],
    among: list[str] | None = None,
):
    """The applications' score and each predictor's on every configuration (of ``among``,
    when given) where all the artifacts they need ran, each relative to the first such
    configuration.  A predictor of several artifacts (the best pair, the micro cells) is
    their geometric mean, each by the weight the predictor gives it."""
    within = results if among is None else among  # an empty ``among`` is no configuration
    configs = [c for c, got in results.items() if all(a in got for a in apps) and c in within]
    configs = [c for c in configs if all(a in results[c] for need in predictors.values() for a in need)]
    if len(configs) < 2:
        return [], {}, {}
    base = configs[0]

    def mean(config: str, members: dict[str, float]) -> float:
        total = sum(members.values())
        logs = sum(w * math.log(results[config][a] / results[base][a]) for a, w in members.items())
        return math.exp(logs / total)

    actual = {c: mean(c, apps) for c in configs}
    predicted = {name: {c: mean(c, need) for c in configs} for name, need in predictors.items()}
    return configs, actual, predicted


def spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3:
        return None

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sd = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / sd if sd else None


def judge(
    configs: list[str], actual: dict[str, float], predicted: dict[str, float], floor: float
) -> dict[str, Any]:
    """One predictor's accuracy over the configurations (see the module's docstring)."""
    errors = sorted(abs(predicted[c] / actual[c] - 1) for c in configs)
    pairs = agree = 0
    for a, b in itertools.combinations(configs, 2):
        if abs(actual[a] / actual[b] - 1) > floor:
            pairs += 1
            agree += (actual[a] > actual[b]) == (predicted[a] > predicted[b])
    return {
        "spearman": spearman([actual[c] for c in configs], [predicted[c] for c in configs]),
        "median_error": statistics.median(errors),
        "p90_error": percentile(errors, 90),  # interpolated, as every p90 dlbench reports
        "pairwise_agreement": agree / pairs if pairs else None,
        "pairs_beyond_noise": pairs,
    }


def validate(
    results: dict[str, dict[str, float]],
    apps: dict[str, float],
    synth: dict[str, float],
    generated_on: set[str],
    floor: float,
    baselines: tuple[str, ...] = (),
    generated: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """The synthetic networks (file -> weight) and the baselines, judged on the measured matrix:
    ``baselines`` are models outside the set (ResNet-50), each a predictor alone;
    ``generated`` the baselines generate wrote (``synth.baselines``), each a predictor of
    its files by their weights."""
    from dlbench.harness.convert.builds import distinct_stems

    # The networks' files are told apart with them, though their row is "synthetic": a
    # baseline that is an earlier network (``r26/synthetic.onnx``) must not read as this one.
    named = distinct_stems([*apps, *synth, *baselines])
    predictors: dict[str, dict[str, float]] = {"synthetic": dict(synth)}
    predictors.update({f"{named[b]} alone (not in the set)": {b: 1.0} for b in baselines})
    predictors.update({name: files for name, files in (generated or {}).items() if files})
    predictors.update({f"{named[a]} alone": {a: 1.0} for a in apps})
    # The configurations are those the applications and the network ran on.  A baseline
    # that missed some of them (a build of it a backend could not read, a version not
    # written) is judged on those it ran, and its row says how many, rather than taking
    # configurations out of everyone's score; one that ran on fewer than three is named.
    ran = complete(results, [*apps, *synth])
    configs, actual, _ = scores(results, apps, {}, ran)
    if not configs:
        return {"configurations": 0, "note": "fewer than two configurations ran every artifact"}
    judged: dict[str, dict[str, Any]] = {}
    own: dict[str, tuple[list[str], dict[str, float], dict[str, float]]] = {}
    missing = []
    for name, need in predictors.items():
        mine, mine_actual, predicted = scores(results, apps, {name: need}, ran)
        if len(mine) < 3:
            missing.append(name)
            continue
        own[name] = (mine, mine_actual, predicted[name])
        judged[name] = {**judge(mine, mine_actual, predicted[name], floor), "configurations": len(mine)}
    if len(apps) > 2:  # the best pair, picked with hindsight: an upper bound for two models
        pairs = {
            f"{named[a]} + {named[b]}": {a: apps[a], b: apps[b]} for a, b in itertools.combinations(apps, 2)
        }
        _, _, paired = scores(results, apps, pairs, configs)
        best = max(paired, key=lambda n: judge(configs, actual, paired[n], floor)["spearman"] or -1)
        judged[f"best pair ({best})"] = {
            **judge(configs, actual, paired[best], floor),
            "configurations": len(configs),
        }
    # Each backend judged on its own, against its own first configuration.  Across engines
    # a predictor must also get the level between them (ONNX Runtime's batch 1 against
    # OpenVINO's), which representatives fitted on one engine's costs can miss on the
    # other; within one engine, only how it responds to the rest: judged apart, a user
    # sees which of the two an error came from.  A rank
    # correlation is the same on either scale, so the held-out figure is read from these.
    backends = {backend_of(c) for c in configs}
    within: dict[str, dict[str, dict[str, Any]]] = {}
    for backend in sorted(backends):
        for name, (mine, _, _) in own.items():
            here = [c for c in mine if backend_of(c) == backend]
            here, here_actual, predicted = scores(results, apps, {name: predictors[name]}, here)
            if len(here) >= 3:
                found = judge(here, here_actual, predicted[name], floor)
                within.setdefault(backend, {})[name] = {**found, "configurations": len(here)}
    held_out = {
        backend: {name: within.get(backend, {}).get(name, {}).get("spearman") for name in own}
        for backend in sorted(backends - generated_on)
    }
    # Every ratio is against one cell per artifact, the baseline's: on a noisy machine
    # that one cell moves a predictor's errors as a whole (the zoo set's median error
    # ran from 13 % to 62 % by the configuration chosen as the baseline).
    spread = sorted(judge(*_from(configs, c, results, apps, synth), floor)["median_error"] for c in configs)
    table = {c: {"actual": actual[c]} for c in configs}
    for name, (mine, _, predicted) in own.items():
        # A predictor's ratios are against the first configuration it ran on: put on the
        # matrix's scale (its baseline's) by the actual score there.
        for c in mine:
            table[c][name] = predicted[c] * actual[mine[0]]
    return {
        "derived": DERIVED,
        "configurations": len(configs),
        "baseline": configs[0],
        "noise_floor": floor,
        "predictors": judged,
        "predictors_left_out": sorted(missing),
        "held_out_spearman": held_out,
        "within_backend": within if len(backends) > 1 else {},
        "median_error_by_baseline": {
            "min": spread[0],
            "median": statistics.median(spread),
            "max": spread[-1],
        },
        "scores": table,
    }


def _from(configs: list[str], base: str, results, apps, synth) -> tuple[list[str], dict, dict]:
    """The configurations, the actual and the synthetic scores with ``base`` as the baseline."""
    ordered = {c: results[c] for c in [base, *(c for c in configs if c != base)]}
    mine, actual, predicted = scores(ordered, apps, {"s": synth})
    return mine, actual, predicted["s"]
