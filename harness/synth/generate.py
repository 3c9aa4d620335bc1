"""``dlbench synth generate``: the workload's representatives, repeated to its time shares.

0. With ``networks`` above 1, the applications are split into groups that responded
   alike to the references (``groups``: one network timed whole reads the harmonic mean
   of its parts' speed ratios, the score is their geometric mean), and each group gets a
   network of its own, made as follows from its applications alone.
1. Each op class's units are clustered (``fit.kmedoids``), weighted by the time their
   nodes take on the fp32 references (each application's time normalized to its own run
   on the first reference, times its share of the mix: its weight tilted so that the
   mix's time moves between references as the score does, ``groups.tilted``); clusters
   go to classes by time share.
2. A calibration network (every medoid a few times) is profiled on every reference (a
   built reference profiles its build): a medoid's measured cost is what its instances
   take there, bridges and the runtime's own reorders included, the profiler's own cost
   per node taken off as it is off the applications' (``runs.without_profiler``).
3. Non-negative least squares (``counts``) gives each medoid a repetition count that
   reproduces, on every reference at once, the applications' time per class (and per
   cluster where the graph is the fp32 one; on a native reference their total time
   alone, ``counts.shares_fitted``), scaled to the time budget; an integer search
   then rounds the counts on what is judged: the class divergence and each reference's
   time relative to the first (the speed ratio the score predicts).
4. The fitted network is profiled in its turn and refitted on its units' costs in place,
   pooled over every network each unit ran in (each fit's budget from the smallest
   again); then refitted near the closest network so far, on the costs measured in that
   network itself, moving a bounded share of its time (a trust region, halved after a
   step that missed more).  Each is judged as the counts were: its profile's class
   divergence plus how far its time on each reference, relative to the first, is from
   the score's.  Times are bench's: each network is timed in a few bench processes a
   reference (``rounds.timed_in_turn``) and its profiles scaled to their median before
   its units are priced, as the applications' profiles are scaled to their own timings
   (``workload.at_timed``): one profile process reads a network's speed at batch 8 up
   to 30 % off, in either direction, from one fit to the next.  The closest few are
   timed again in turn with the applications, and the one kept is judged on those
   times and the score they give (``playoff``).
5. The static self-check: the op-class time shares the counts predict, against the
   workload's, as a total-variation divergence on each reference whose shares are
   fitted.  A budget too small for integer counts to hit the shares is doubled until
   they do (or the ceiling, or its applications' own time, is reached), and the budget
   used is stated.  The measured divergence follows, with the divergence between two
   profiles of the network itself: its noise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.converters.int8_recipe import mode_metadata
from dlbench.core.errors import UserError
from dlbench.harness.synth import RATIO_WEIGHT
from dlbench.harness.synth.counts import (
    DIVERGENCE_LIMIT,
    contributions,
    divergence,
    fit_budget,
    judged,
    pooled,
    scaled,
    shares_fitted,
    solve,
    unit_costs,
    worst_divergence,
)
from dlbench.harness.synth.playoff import (
    SCORE_MOVED_LIMIT,
    moved_line,
    playoff,
    ratio_misses,
    score_moved,
)

NETWORK_KIND = "dlbench-synth-network"  # the description's kind: what validate reads
CALIBRATION_REPEATS = 3
RADIUS = 0.3  # the most of that network's time the first local refit may move


def _near(own: list[list[Any]], elsewhere: list[list[Any]], counts: np.ndarray) -> list[list[Any]]:
    """Per reference, each unit's cost in the network of ``counts`` where it ran there, and
    its pooled cost (``elsewhere``) where it did not."""
    return [[o if n else p for o, p, n in zip(mine, theirs, counts)] for mine, theirs in zip(own, elsewhere)]


def generate(
    workload: dict[str, Any],
    out: Path,
    *,
    networks: int = 1,
    clusters: int = 24,
    fraction: float = 0.1,
    ceiling: float = 1.0,
    warmup: int = 5,
    iterations: int = 20,
    timeout: float | None = None,
    timings: int = 3,
    refits: tuple[int, int] = (3, 4),
    ratio_weight: float = RATIO_WEIGHT,
    seed: int = 0,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The synthetic benchmark: at most ``networks`` networks, one per group of
    applications (``groups.split``), ``out`` itself where there is one and ``out``'s stem
    numbered (``synthetic-1.onnx``) where there are several; their description, with the
    baselines validate scores beside them, at ``out`` with .json.  Each fitted network is
    timed on every reference in ``timings`` processes (``rounds.timed_in_turn``; 0: its
    profiles' times alone), its profiles scaled to them, as the applications' profiles
    are to their timings where the workload has them (``workload.at_timed``).  ``refits``:
    the fits after the first on pooled costs, then the local ones (step 4 above);
    ``ratio_weight`` as ``counts.judged``."""
    from dlbench.core.atomic import write_json
    from dlbench.harness.synth.baselines import write as write_baselines
    from dlbench.harness.synth.frameworks import write_versions
    from dlbench.harness.synth.groups import split, subset
    from dlbench.harness.synth.workload import at_timed, named_in, set_ms

    workload = at_timed(workload)
    apps = workload["applications"]
    parts = split(workload, networks)
    paths = (
        [out]
        if len(parts) == 1
        else [out.with_name(f"{out.stem}-{i}.onnx") for i in range(1, len(parts) + 1)]
    )
    total = sum(a["weight"] for a in apps)
    made = []
    for members, path in zip(parts, paths):
        if len(parts) > 1:
            say(f"{path.name}: {', '.join(Path(apps[i]['source']).name for i in members)}")
        # The representatives and the time budget are shared among the networks by weight,
        # as one network would share them among its applications: a group of fast ones
        # gets the time its weight earns, not a tenth of its own few milliseconds.
        weight = sum(apps[i]["weight"] for i in members) / total
        share = max(1, round(clusters * weight))
        base_us = weight * set_ms(apps, 0) * 1000
        entry = _network(
            subset(workload, members),
            path,
            share,
            (fraction * base_us, ceiling * base_us),
            (warmup, iterations, timeout),
            (timings, *refits),
            ratio_weight,
            seed,
            say,
        )
        made.append({"weight": weight, **entry})
    refs = range(len(workload["references"]))
    description: dict[str, Any] = {
        "kind": NETWORK_KIND,
        "references": workload["references"],
        "applications": [
            {"source": named_in(out.parent, a["source"]), "weight": a["weight"], "native": a.get("native")}
            for a in apps
        ],
        "networks": made,
        "divergence_limit": DIVERGENCE_LIMIT,
        "score_moved_limit": SCORE_MOVED_LIMIT,
        "ratio_weight": ratio_weight,
        "self_check": "ok" if all(m["self_check"] == "ok" for m in made) else "over the limit",
        # The benchmark's run time (every network once) against the whole set's.
        "measured_ms": [sum(m["measured_ms"][r] for m in made) for r in refs],
        "applications_ms": [set_ms(apps, r) for r in refs],
    }
    # Their other forms: the framework versions (the same graphs, checked against ONNX
    # Runtime) and the builds through the build path any model takes, verified; and the
    # baselines validate scores beside them, from the whole workload, whose framework
    # versions are written with the networks' (one process per framework).
    description.update(write_baselines(workload, out.parent, out.stem, seed))
    entries = [*made, *description["micro_cells"], *description["replays"]]
    files = [*paths, *(out.parent / e["onnx"] for e in entries[len(made) :])]
    for entry, (versions, errors) in zip(entries, write_versions(files, say)):
        entry["frameworks"], entry["framework_errors"] = versions, errors
    write_json(out.with_suffix(".json"), description)
    return description


def _network(
    workload: dict[str, Any],
    out: Path,
    clusters: int,
    budget: tuple[float, float],
    runs: tuple[int, int, float | None],
    tries: tuple[int, int, int],
    ratio_weight: float,
    seed: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """One network at ``out`` for all of ``workload``'s applications, and its entry in the
    description: its run time on the first reference ``budget`` (µs, and the most it may
    be doubled to as ``counts.fit_budget`` needs), each profile ``runs`` (warm-up,
    iterations, timeout), ``tries`` the timings, refits and local refits."""
    import onnx

    from dlbench.core.atomic import scratch
    from dlbench.harness.synth.emit import network, spec
    from dlbench.harness.synth.fit import medoids
    from dlbench.harness.synth.groups import tilted_workload
    from dlbench.harness.synth.matrix import build_all
    from dlbench.harness.synth.rounds import timed_in_turn
    from dlbench.harness.synth.runs import network_runs, profile_at
    from dlbench.harness.synth.workload import Reference, named_in, set_mode, set_ms

    refs = [Reference.from_json(r) for r in workload["references"]]
    options = workload.get("options", {})  # each backend's, as the applications ran
    timings, refits, local_refits = tries
    dynamic = set_mode(workload["applications"])
    given = workload
    workload, mix, score = tilted_workload(workload, say)
    profiled, moved = score, None  # the score the fits aim at; how far the playoff's is
    apps_ms = [a["node_ms"] for a in given["applications"]]  # timed, where the workload was
    units, owner = medoids(workload, contributions(workload), clusters)
    fitted_refs = shares_fitted(workload)
    say(f"{len(units)} representatives from {len(workload['nodes'])} nodes")

    def measure(counts: list[int], path: Path) -> tuple[Any, ...]:
        """Its units' costs, its profiles, its ms a run on each reference (with
        ``timings``, the median of its timings, and its profiles scaled to them, as the
        applications' are, ``at_timed``, so each unit's cost is freed of its profile
        process's luck) and the file that runs each reference."""
        onnx.save(network(list(zip(units, counts)), seed, name=out.stem), str(path))
        files, read, shapes = network_runs(path, refs, dynamic)
        profiles = [
            profile_at(f, r, *runs, say, options=options, shapes=s) for f, r, s in zip(read, refs, shapes)
        ]
        ms = [p["node_ms_per_run"] for p in profiles]
        if timings:
            say(f"time {path.name} in {timings} processes a reference")
            db = str(path.parent / "timings.sqlite")
            ms = timed_in_turn([files], refs, timings, db, runs[2], options, [shapes])[0]
            profiles = [scaled(p, m) for p, m in zip(profiles, ms)]
        return (*unit_costs(units, profiles, counts), profiles, ms, (files, shapes))

    with scratch("dlbench-synth") as tmp:
        # Calibration: every representative a few times.  Then each fitted network itself:
        # its units' costs in place (their neighbours, their lane's length) replace the
        # earlier ones for the next fit, and the network that comes closest, timed again
        # with the applications (``playoff``), is the one kept, its profile the measured
        # check.
        costs, main, _, _, _ = measure([CALIBRATION_REPEATS] * len(units), Path(tmp) / "calibration.onnx")
        tried: list[dict[str, Any]] = []
        # Every in-place cost a unit was measured at, pooled by its instances: one profile's
        # costs alone are noise on a busy machine (two profiles of one network differed by
        # 0.02 to 0.2 on the zoo set), and refitting on them swung the fit from one network
        # to the next.
        seen: list[list[list[tuple[int, dict[str, float], float]]]] = [[[] for _ in units] for _ in refs]

        def tried_out(
            fitted: tuple[Any, ...], curve: list[tuple[float, float]], near: int | None = None
        ) -> dict[str, Any] | None:
            """The fit's network measured and judged, its units' in-place costs pooled
            (None: no unit has a count, or these counts were tried already)."""
            counts, used, targets, predicted = fitted
            if not any(counts) or any(np.array_equal(counts, t["counts"]) for t in tried):
                return None
            placed, own, profiles, ms, (files, shapes) = measure(
                list(counts), Path(tmp) / f"fit-{len(tried) + 1}.onnx"
            )
            shares = [{c["class"]: c["share"] for c in m["classes"]} for m in profiles]
            worst = worst_divergence(shares, targets, fitted_refs)
            off = ratio_misses(ms, score)
            # Beside what its counts predicted: where a miss came from, the fit or its costs.
            sums = [sum(p.values()) for p in predicted]
            said = ", ".join(f"{m:+.1%} ({p:+.1%})" for m, p in zip(off, ratio_misses(sums, score)))
            said = f"; time ratios against the score (predicted) {said}" if off else ""
            say(f"fit {len(tried) + 1} measured {worst:.3f}{said}")
            # Judged as the fit judges its counts: the worst class divergence plus how far
            # each reference's time ratio is from the score's, the figure validate tests.
            entry = {"miss": judged(worst, off, ratio_weight), "counts": counts, "used": used}
            entry |= {"targets": targets, "predicted": predicted, "profiles": profiles, "curve": curve}
            entry |= {"placed": placed, "own": own, "ms": ms, "files": files, "shapes": shapes}
            entry["fit"] = {"fit": len(tried) + 1, "near": near, "measured_divergence": worst}
            entry["fit"] |= {"time_ratio_miss": off, "timed_again": None}
            tried.append(entry)
            for j, n in enumerate(counts):
                for r in range(len(refs)) if n else ():
                    seen[r][j].append((int(n), placed[r][j], own[r][j]))
                    costs[r][j], main[r][j] = pooled(seen[r][j])
            return entry

        for _ in range(1 + refits):
            # Each fit doubles its budget from the smallest again: costs measured in place
            # can meet the shares with fewer instances than the calibration's promised.
            curve: list[tuple[float, float]] = []
            fitted = fit_budget(workload, owner, costs, main, *budget, curve, ratio_weight)
            tried_here = ", ".join(f"{b / 1000:.3g} ms: {d:.3f}" for b, d in curve)
            say(f"fit {len(tried) + 1}: {tried_here}; {fitted[1] / 1000:.3g} ms kept")
            if tried_out(fitted, curve) is None:
                break
        # Then local refits, each from the best network so far on the costs measured in
        # that network itself, moving at most ``radius`` of its time: the pooled costs
        # predicted every fit's time ratios within 1 % and were timed 5-38 % off (a unit
        # costs what its neighbours let it), where its own network's costs are exact for
        # it and hold for a few instances more or less.  A step that misses more halves
        # the radius (a trust region).
        radius = RADIUS
        for _ in range(local_refits if tried else 0):
            best = min(tried, key=lambda t: t["miss"])
            counts = np.asarray(best["counts"])
            near, near_main = _near(best["placed"], costs, counts), _near(best["own"], main, counts)
            say(f"fit {len(tried) + 1}: near fit {best['fit']['fit']}, moving {radius:.0%} of it at most")
            fitted = solve(workload, owner, near, near_main, best["used"], (counts, radius), ratio_weight)
            # Fitted at one budget, its anchor's: that is the curve its record shows.
            curve = [(best["used"], worst_divergence(fitted[2], fitted[1], fitted_refs))]
            step = tried_out((fitted[0], best["used"], *fitted[1:]), curve, best["fit"]["fit"])
            if step is None or step["miss"] >= best["miss"]:
                radius /= 2
        finalists = tried
        if timings and len(tried) > 1:
            finalists, score, apps_ms = playoff(
                tried, given, refs, Path(tmp), timings, runs[2], say, ratio_weight
            )
            moved = score_moved(profiled, score)
            if line := moved_line(moved, [r.text for r in refs[1:]]):
                say(line)
    if not tried:
        raise UserError("the fit gave no unit a count: the workload's nodes have no emittable work")
    kept = min(finalists, key=lambda t: t["miss"])
    counts, used, targets, predicted = kept["counts"], kept["used"], kept["targets"], kept["predicted"]
    measured, main, curve = kept["profiles"], kept["own"], kept["curve"]
    checks = [divergence(p, t) for p, t in zip(predicted, targets)]
    worst = worst_divergence(predicted, targets, fitted_refs)
    lanes = [(u, int(n)) for u, n in zip(units, counts)]
    model = network(lanes, seed, name=out.stem)
    # Its INT8 mode travels with it: a build by any path, bench's or a user's, takes it.
    about = {"dlbench.model": out.stem, "dlbench.synthetic": "1", **mode_metadata(dynamic)}
    onnx.helper.set_model_props(model, {**about, **spec(lanes)})
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    apps = workload["applications"]
    # The network measured as it runs: its own profile's class shares against the
    # workload's (noise included, which the static check has none of); and profiled once
    # more: how far two measurements of one network are apart here and now, the noise
    # any measured divergence carries.
    shares = [{c["class"]: c["share"] for c in m["classes"]} for m in measured]
    # Its builds through the build path any model takes, verified, made once: the second
    # profile runs them where a reference is a build (one over its tolerance, left out of
    # the builds, is still what that reference runs, so it is built for the profile alone).
    source = str(out)
    ready, left_out = build_all([source], list(BUILDS), out.parent / "builds", say, modes={source: dynamic})
    built = ready[source]
    with scratch("dlbench-synth") as tmp:
        # Its native versions made in scratch: validate's are written with the description.
        at = Path(tmp) / out.name
        at.write_bytes(out.read_bytes())
        _, read, shapes = network_runs(at, refs, dynamic, built)
        again = [
            profile_at(f, r, *runs, say, options=options, shapes=s) for f, r, s in zip(read, refs, shapes)
        ]
    repeat = [{c["class"]: c["share"] for c in m["classes"]} for m in again]
    return {
        "onnx": out.name,
        "applications": [named_in(out.parent, a["source"]) for a in apps],
        # Each application's share of the time the network was fitted to (``tilted_workload``).
        "fit_mix": mix,
        "budget_us": used,  # its time on the first reference, as fitted
        # The budgets its fit tried, each with the divergence its counts predicted.
        "budget_curve": [{"budget_us": b, "predicted_divergence": d} for b, d in curve],
        "int8_dynamic": dynamic,
        "units": [
            {**u.to_json(), "count": int(n), "cost_us": [c[j] for c in main]}  # as it ran there
            for j, (u, n) in enumerate(lanes)
        ],
        "target_class_us": targets,
        "predicted_class_us": predicted,
        "predicted_divergence": checks,
        "self_check": "ok" if worst <= DIVERGENCE_LIMIT else "over the limit",
        # Per reference, whether its class shares were fitted and checked (a native
        # reference's total time alone, ``counts.shares_fitted``).
        "shares_fitted": fitted_refs,
        "measured_class_share": shares,
        "measured_divergence": [divergence(m, t) for m, t in zip(shares, targets)],
        "measured_ms": [m["node_ms_per_run"] for m in measured],
        "timed_ms": kept["ms"],  # the median of its timing processes (its profiles' without)
        # Its time on each reference after the first relative to the first, against the
        # score's (the applications' weighted geometric mean): what validate will test.
        "measured_ratio_miss": ratio_misses(kept["ms"], score),
        # The score it was kept by, and the applications' times it is the ratios of: the
        # workload's, or their timings in turn with the closest fits (``playoff``).
        "score_ratios": [float(x) for x in score],
        "score_ms": apps_ms,
        # The playoff's score against the workload's, on each reference after the first
        # (None: no playoff); beyond the limit, the fits aimed at another score.
        "score_moved": moved,
        # Every fit tried: the network it was refitted near (None: a fit on the pooled
        # costs), its profile's worst class divergence, its time ratio misses against the
        # workload's score and, for the finalists, when timed again with the applications.
        "fits": [t["fit"] for t in tried],
        "kept_fit": kept["fit"]["fit"],
        "repeat_divergence": [divergence(a, b) for a, b in zip(shares, repeat)],
        "applications_ms": [set_ms(apps, i) for i in range(len(refs))],
        "builds": {t: Path(p).name for t, p in built.items() if t != "fp32"},
        "builds_left_out": left_out,
    }


BUILDS = ("int8", "fp16")
