"""The synthetic benchmark's printed tables: the workload, the network, the validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.harness.output.tables import markdown
from dlbench.harness.synth.matrix import backend_of
from dlbench.harness.synth.playoff import moved_lines


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def workload_tables(w: dict[str, Any]) -> str:
    """Per application and reference: time (its profile's nodes, and bench's median), the top
    classes' shares, the motifs; then the heaviest shape classes over the weighted set."""
    refs = [
        f"b{r['batch']}/{r['threads'] or 'all'}t {r.get('build', 'fp32')}".removesuffix(" fp32")
        + (f" {r['backend']}" if r.get("backend") else "")
        for r in w["references"]
    ]
    rows = []
    for a in w["applications"]:
        for i, ref in enumerate(refs):
            top = sorted(a["classes"][i].items(), key=lambda kv: -kv[1])[:3]
            motifs = ", ".join(f"{k} {v}" for k, v in a["motifs"].items() if v) if i == 0 else ""
            shares = ", ".join(f"{c} {_pct(s)}" for c, s in top)
            rows.append(
                [
                    a["label"] if i == 0 else "",
                    a["weight"] if i == 0 else "",
                    ref,
                    f"{a['node_ms'][i]:.3f} ({a.get('profiled_ms', a['node_ms'])[i]:.3f})",
                    f"{a['timed_ms'][i]:.3f}" if a.get("timed_ms") else "-",
                    shares,
                    motifs,
                ]
            )
    headers = [
        "Application",
        "Weight",
        "Reference",
        "ms a run (profiled)",
        "Timed ms",
        "Top classes",
        "Motifs",
    ]
    out = markdown(headers, rows)
    shapes: dict[str, list[float]] = {}
    for n in w["nodes"]:
        if n.get("shape_class"):
            entry = shapes.setdefault(n["shape_class"], [0.0, 0.0, 0])
            entry[0] += n["us"][0]
            entry[1] += n.get("flops", 0.0)
            entry[2] += 1
    heavy = sorted(shapes.items(), key=lambda kv: -kv[1][0])[:12]
    rows = [[name, n, f"{us / 1000:.3f}", f"{flops / 1e6:.2f}"] for name, (us, flops, n) in heavy]
    return out + "\n\n" + markdown(["Shape class", "Nodes", f"ms at {refs[0]}", "MFLOP/sample"], rows)


def network_table(d: dict[str, Any]) -> str:
    """Each network's units and checks, then the benchmark's run time against the set's."""
    parts = [_one_network(n, d["divergence_limit"], line) for n, line in zip(d["networks"], moved_lines(d))]
    time = ", ".join(f"{s / a:.1%}" for s, a in zip(d["measured_ms"], d["applications_ms"]))
    return (
        "\n\n".join(parts) + f"\n\nThe synthetic benchmark's run time (every network once) against "
        f"the whole application set's, per reference: {time}." + _baselines(d)
    )


def _one_network(n: dict[str, Any], limit: float, moved_line: str | None) -> str:
    rows = [
        [u["op"], u["cls"], "x".join(map(str, u["x"])), "x".join(map(str, u["y"])), u["count"],
         " / ".join(f"{c:.1f}" for c in u["cost_us"])]
        for u in n["units"] if u["count"]
    ]  # fmt: skip
    table = markdown(
        ["Op", "Class", "Input (per sample)", "Output", "Count", "µs each (per reference)"], rows
    )
    apps = ", ".join(Path(a).name for a in n["applications"])
    # A reference fitted to the total time alone (a native one) is not checked.
    fitted = n.get("shares_fitted") or [True] * len(n["predicted_divergence"])
    checks = ", ".join(
        f"{x:.3f}" + ("" if f else " (time only)") for x, f in zip(n["predicted_divergence"], fitted)
    )
    measured = ", ".join(f"{x:.3f}" for x in n["measured_divergence"])
    noise = ", ".join(f"{x:.3f}" for x in n["repeat_divergence"])
    time = ", ".join(f"{s / a:.1%}" for s, a in zip(n["measured_ms"], n["applications_ms"]))
    tried = ", ".join(
        f"{b['budget_us'] / 1000:.3g}: {b['predicted_divergence']:.3f}" for b in n.get("budget_curve", [])
    )
    misses = ", ".join(f"{m:+.1%}" for m in n.get("measured_ratio_miss", []))
    said = "\nIts time ratios against the score's, on each reference after the first: "
    fits = n.get("fits") or []
    again = "timed again in turn with its applications" if any(f["timed_again"] for f in fits) else "timed"
    kept = f"; fit {n['kept_fit']} of the {len(fits)} tried, {again}" if fits else ""
    moved_said = ""
    if moved := n.get("score_moved"):
        shown = ", ".join(f"{m:+.1%}" for m in moved)
        moved_said = f"\nIts applications' score timed again with it, against their profile's: {shown}"
        moved_said += f"; {moved_line}." if moved_line else "."
    return (
        f"{n['onnx']} (weight {n['weight']:.2f}), for {apps}:\n\n{table}\n\n"
        f"Op-class time-share divergence from its applications' workload, per reference: predicted "
        f"{checks} (limit {limit}; self-check {n['self_check']}), measured {measured} "
        f"(two profiles of the network itself differ by {noise}).\n"
        f"Its run time against its applications', per reference: {time}."
        + (f"{said}{misses}{kept}." if misses else "")
        + moved_said
        + (
            f"\nThe budgets its fit tried (ms on the first reference: predicted divergence): {tried}."
            if tried
            else ""
        )
    )


def _baselines(d: dict[str, Any]) -> str:
    cells = ", ".join(f"{c['shape_class']} (weight {c['weight']:.2f})" for c in d.get("micro_cells") or [])
    replays = len(d.get("replays") or [])
    return (
        f"\nThe baselines validate scores beside the networks: micro cells {cells or 'none'}; "
        f"{replays} layer replays (one per application)."
        if cells or replays
        else ""
    )


# A predictor's figures as both validation tables show them (``_figures``, in this order).
FIGURES = ["Configurations", "Spearman ρ", "Median error", "p90 error", "Pairwise agreement"]


def _figures(j: dict[str, Any]) -> list[Any]:
    rho = "-" if j["spearman"] is None else f"{j['spearman']:.3f}"
    return [
        j["configurations"],
        rho,
        _pct(j["median_error"]),
        _pct(j["p90_error"]),
        _pct(j["pairwise_agreement"]),
    ]


def _within(v: dict[str, Any]) -> str:
    """The figures within each backend, for the network and the baselines outside the
    set (each application alone is left to the main table)."""
    rows = [
        [backend, name, *_figures(j)]
        for backend, judged in (v.get("within_backend") or {}).items()
        for name, j in judged.items()
        if not name.endswith(" alone")
    ]
    if not rows:
        return ""
    return (
        "\n\nWithin each backend, its ratios against its own first configuration (the level "
        "between engines taken out):\n\n" + markdown(["Backend", "Predictor", *FIGURES], rows)
    )


def validation_table(v: dict[str, Any]) -> str:
    if not v.get("predictors"):
        return v.get("note", "nothing to judge")
    rows = []
    for name, j in v["predictors"].items():
        held = [h.get(name) for h in v["held_out_spearman"].values()]
        rows.append([name, *_figures(j), ", ".join("-" if h is None else f"{h:.3f}" for h in held) or "-"])
    ran = [backend_of(c) for c in v.get("scores", {})]
    held_out = ", ".join(f"{b}, {ran.count(b)} configurations" for b in v["held_out_spearman"]) or "none"
    headers = ["Predictor", *FIGURES, f"ρ held out ({held_out})"]
    left = v.get("matrix", {}).get("left_out") or []
    left_out = f"\nLeft out (their configurations lose the artifact): {'; '.join(left)}." if left else ""
    timed = v.get("matrix", {}).get("timed_unverified") or []
    if timed:
        left_out += f"\nTimed though over their accuracy tolerance: {'; '.join(timed)}."
    if v.get("predictors_left_out"):
        left_out += (
            f"\nNot judged (ran on fewer than three configurations): {', '.join(v['predictors_left_out'])}."
        )
    rounds = v.get("rounds") or {}
    if "score_spread" in rounds:
        cell, score = rounds["cell_spread"], rounds["score_spread"]
        left_out += (
            f"\nEach cell ran in {rounds['rounds']} rounds (each in the reverse order of the one "
            f"before), its figure their median.  One cell's rounds differ by {_pct(cell['median'])} "
            f"at the median (p90 {_pct(cell['p90'])}); one configuration's applications' score by "
            f"{_pct(score['median'])} (p90 {_pct(score['p90'])}), the noise floor of the pairs."
        )
        if mine := rounds.get("synthetic_spread"):
            left_out += (
                f"  The synthetic score's own by {_pct(mine['median'])} (p90 {_pct(mine['p90'])}): "
                "an error within the two together is one these rounds cannot tell from noise."
            )
    by_count: dict[int, list[str]] = {}
    for name, n in (v.get("processes") or {}).items():
        by_count.setdefault(n, []).append(name)
    if any(n > 1 for n in by_count):
        each = "; ".join(f"{n} for {', '.join(sorted(names))}" for n, names in sorted(by_count.items()))
        left_out += (
            f"\nProcesses per cell and round, taking turns with the applications' (one each), a "
            f"round's figure their median: {each}."
        )
    noisy = len(v.get("matrix", {}).get("unstable_cells") or [])
    if noisy:
        left_out += (
            f"\n{noisy} of {v['matrix']['cells']} cells unstable (bench's spread test): the figures carry "
            "their noise."
        )
    if "median_error_by_baseline" in v:
        by = v["median_error_by_baseline"]
        left_out += (
            f"\nThe synthetic median error with each configuration as the baseline in turn: "
            f"{_pct(by['min'])} to {_pct(by['max'])} (median {_pct(by['median'])})."
        )
    asked = v.get("matrix", {}).get("configurations", v["configurations"])
    lost = asked > v["configurations"]
    of = f" of the matrix's {asked} (the rest lost an application or the network)" if lost else ""
    if options := v.get("matrix", {}).get("options"):
        of += ", backend options " + ", ".join(f"{k}={val}" for k, val in options.items())
    return (
        f"{markdown(headers, rows)}{_within(v)}\n\n{v['configurations']} configurations{of}, "
        f"baseline {v['baseline']}{left_out}\n"
        f"Pairs counted beyond a noise floor of {_pct(v['noise_floor'])}.\n{v['derived']}"
    )
