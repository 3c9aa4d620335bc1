"""The comparison as Markdown: the verdict table, the cells left unpaired, and the
PyTorch-vs-MindSpore paper's Table 2 (Model | Time | Loss | Acc) for training."""

from __future__ import annotations

from typing import Any

from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness.compare.match import field
from dlbench.harness.compare.pairs import Comparison, Pair
from dlbench.harness.compare.sources import INSTALLED
from dlbench.harness.output.tables import markdown, network_name

# Kinds whose cells are named by their backend (engine), not their framework.
ENGINE_KINDS = ("bench", "micro")
# The paper names rows GoogleNet_MS, GoogleNet_PT.
SUFFIX = {"pytorch": "PT", "mindspore": "MS", "tensorflow": "TF"}


def network(model: str | None) -> str:
    return str(network_name(model))


def _change(a: Any, b: Any) -> str:
    return str(a) if a == b else f"{a} → {b}"


def _threads(n: int) -> str:
    return f"{n} thread" + ("s" if n != 1 else "")


def cell_label(p: Pair) -> str:
    a, b = p.baseline, p.candidate
    engine = "backend" if a.get("kind") in ENGINE_KINDS else "framework"
    parts = [_change(a.get(engine), b.get(engine))]
    envs = field(a, "with"), field(b, "with")
    if envs[0] != envs[1] or envs[0]:
        parts[0] += f" [{_change(envs[0] or INSTALLED, envs[1] or INSTALLED)}]"
    other = "framework" if engine == "backend" else "backend"
    if a.get(other) != b.get(other) and (a.get(other) or b.get(other)):
        parts[0] += f" ({_change(a.get(other), b.get(other))})"
    parts += [
        a.get("device"),
        a.get("precision"),
        f"batch {a.get('batch_size')}",
        field(a, "mode"),
    ]  # a layer cell's forward or train
    if a.get("kind") == "bench":
        parts.append(a.get("scenario"))
    if a.get("intra_op_threads"):
        parts.append(_threads(a["intra_op_threads"]))
    return ", ".join(str(x) for x in parts if x)


def _sps(r: dict[str, Any]) -> str:
    if r.get("status") == "failed":
        return "FAILED"
    t = r.get("throughput_sps")
    return f"{t:.1f}/s" if t else "—"


def comparison_table(c: Comparison, confidence: float = 0.95, show_machine: bool = False) -> str:
    headers = [
        "Model",
        "Cell",
        "Baseline",
        "Candidate",
        "Ratio",
        f"{confidence * 100:g}% CI",
        "Verdict",
        "Samples",
    ] + (["Machine"] if show_machine else [])
    rows = []
    for p in c.pairs:
        e = p.estimate
        row = [
            network(p.baseline.get("model")),
            cell_label(p),
            _sps(p.baseline),
            _sps(p.candidate),
            f"{e.ratio:.3f}" if e else "—",
            f"[{e.low:.3f}, {e.high:.3f}]" if e else "—",
            p.verdict + (f" ({p.note})" if p.note else ""),
            _samples(p),
        ]
        if show_machine:
            row.append(_change(p.baseline.get("machine_id"), p.candidate.get("machine_id")))
        rows.append(row)
    return markdown(headers, rows)


def _record_label(r: dict[str, Any]) -> str:
    engine = r.get("backend") if r.get("kind") in ENGINE_KINDS else r.get("framework")
    scenario = r.get("scenario") if r.get("kind") == "bench" else None
    parts = [
        r.get("kind"),
        engine,
        r.get("device"),
        r.get("precision"),
        f"batch {r.get('batch_size')}",
        scenario,
        _threads(r["intra_op_threads"]) if r.get("intra_op_threads") else None,
    ]
    return f"{network(r.get('model'))}: " + ", ".join(str(x) for x in parts if x)


def unmatched(c: Comparison) -> str:
    lines = []
    for side, records in (("baseline", c.only_baseline), ("candidate", c.only_candidate)):
        lines += [f"- only in the {side}: {_record_label(r)} (run {r.get('run_id')})" for r in records]
    if not lines:
        return ""
    return f"Unmatched cells ({len(lines)}), not compared:\n" + "\n".join(lines)


def _samples(p: Pair) -> str:
    """How many samples of what: "3+3 processes" (--repeats), "150+150 iterations"."""
    e = p.estimate
    return f"{e.n_baseline}+{e.n_candidate} {p.basis}" if e and p.basis else "—"


def footnote(confidence: float, resamples: int, floor) -> str:
    """``floor``: the ``compare.noise.NoiseFloor`` the verdicts used."""
    return (
        f"Baseline/Candidate: recorded throughput (samples in the measured window / its "
        f"wall time). Ratio: candidate / baseline median throughput, over per-process "
        f"throughputs when both cells ran at least 3 fresh processes (bench --repeats), "
        f"else over per-iteration throughputs (Samples says which); "
        f"{confidence * 100:g}% CI: percentile bootstrap of that ratio ({resamples} "
        f"resamples). Verdict: faster or slower when the interval excludes 1 and the "
        f"ratio is above 1 + or below 1 / (1 + the {floor.describe()}), else within "
        f"noise."
    )


# --- the paper's Table 2 -------------------------------------------------------------------

PAPER_HEADERS = ("Model", "Framework", "Time", "Loss", "Acc", "Throughput")


def train_time_s(r: dict[str, Any]) -> float | None:
    m = r.get("metrics") or {}
    if r.get("status") == "failed" or m.get("window_s") is None:
        return None
    return float(m["window_s"]) + float(m.get("warmup_total_s") or 0)


def paper_time(seconds: float) -> str:
    """As the paper writes it: 126.87(m), 1049(s), 610(h)."""
    if seconds < 120:
        return f"{seconds:.2f}(s)"
    if seconds < 7200:
        return f"{seconds / 60:.2f}(m)"
    return f"{seconds / 3600:.2f}(h)"


def _framework(r: dict[str, Any]) -> str:
    fw = FRAMEWORKS.get(r.get("framework"))
    return f"{fw.display if fw else r.get('framework')} {r.get('framework_version') or ''}".strip()


def _paper_row(r: dict[str, Any]) -> list[str]:
    m = r.get("metrics") or {}
    name = f"{network(r.get('model'))}_{SUFFIX.get(r.get('framework'), r.get('framework'))}"
    if r.get("status") == "failed":
        return [name, _framework(r), f"FAILED: {r.get('error') or ''}".strip(), "", "", ""]
    t = train_time_s(r)
    acc = (m.get("eval") or {}).get("accuracy")
    loss = m.get("loss_end")
    return [
        name,
        _framework(r),
        paper_time(t) if t is not None else "—",
        f"{loss:.4g}" if loss is not None else "—",
        f"{acc * 100:.2f}%" if acc is not None else "—",
        f"{r['throughput_sps']:.2f}/s" if r.get("throughput_sps") else "—",
    ]


def paper_pairs(c: Comparison) -> list[Pair]:
    return [
        p
        for p in c.pairs
        if p.baseline.get("kind") == "train" and p.baseline.get("framework") != p.candidate.get("framework")
    ]


def paper_table(c: Comparison) -> str:
    """Table 2 of the paper, for training pairs across frameworks; empty when there are none."""
    pairs = paper_pairs(c)
    if not pairs:
        return ""
    rows, ratios = [], []
    for p in pairs:
        rows += [_paper_row(p.baseline), _paper_row(p.candidate)]
        ratios.append(_ratio_line(p, label=len(pairs) > 1))
    steps = sorted(
        {(p.baseline.get("iterations"), p.baseline.get("warmup_iterations")) for p in pairs}
        | {(p.candidate.get("iterations"), p.candidate.get("warmup_iterations")) for p in pairs},
        key=str,
    )
    note = (
        "Time: measured training wall time = the measured window (metrics.window_s) + the "
        "timed warm-up (metrics.warmup_total_s); data generation, model build and process "
        "start-up are excluded. Steps (measured, warm-up): "
        + ", ".join(f"{s}, {w}" for s, w in steps)
        + ". Loss: last step's loss (metrics.loss_end). Acc: metrics.eval.accuracy, "
        "— when the run did not evaluate. Throughput: samples per second."
    )
    return "\n".join(
        [
            "Table 2. Overall training speed (as in the PyTorch-vs-MindSpore paper)",
            "",
            markdown(PAPER_HEADERS, rows),
            "",
            *ratios,
            "",
            note,
        ]
    )


def _ratio_line(p: Pair, label: bool) -> str:
    a, b = p.baseline, p.candidate
    fa, fb = (
        FRAMEWORKS[r["framework"]].display if r.get("framework") in FRAMEWORKS else str(r.get("framework"))
        for r in (a, b)
    )
    prefix = f"{network(a.get('model'))} ({cell_label(p)}): " if label else ""
    ta, tb = train_time_s(a), train_time_s(b)
    if ta is None or tb is None or ta <= 0:
        return f"{prefix}{fb} / {fa} time: — (a run failed)"
    line = f"{prefix}{fb} / {fa} time: {tb / ta:.2f}"
    if a.get("throughput_sps") and b.get("throughput_sps"):
        line += f"; throughput: {b['throughput_sps'] / a['throughput_sps']:.2f}"
    if (a.get("iterations"), a.get("warmup_iterations")) != (b.get("iterations"), b.get("warmup_iterations")):
        line += (
            f" (step counts differ: {a.get('iterations')}+{a.get('warmup_iterations')} vs "
            f"{b.get('iterations')}+{b.get('warmup_iterations')}; compare throughput)"
        )
    return line
