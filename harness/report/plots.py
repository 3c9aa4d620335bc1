"""The report's charts as PNG bytes.

matplotlib is imported only when a chart is drawn, and through ``Figure`` and the
Agg canvas directly: no pyplot global state, no display needed, no backend switch
that could surprise a caller that has its own.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from dlbench.harness.frameworks import FRAMEWORKS
from dlbench.harness.tables import network_name


@dataclass
class Plot:
    title: str
    png: bytes | None      # None: nothing to draw
    note: str = ""         # why it was skipped, or how to read it


def _models(records) -> int:
    return len({r.get("model") for r in records})


def _bench_label(r: dict[str, Any], several_models: bool) -> str:
    """One line per thing measured: backend, device, precision and, for a converted file,
    the framework it came from (an ONNX file from PyTorch and one from TensorFlow differ)."""
    parts = [r.get("device") or "", r.get("precision") or ""]
    if r.get("framework") and r.get("framework") != r.get("backend"):
        parts.append(f"from {r['framework']}")
    if r.get("scenario") not in (None, "offline", "server"):
        parts.append(r["scenario"])
    label = f"{r.get('backend')} ({', '.join(p for p in parts if p)})"
    return f"{network_name(r.get('model'))}: {label}" if several_models else label


def _sweep(records: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """label -> batch size -> newest measured (not failed) loop-scenario record."""
    cells = [r for r in records if r["kind"] == "bench" and r["status"] != "failed"
             and r.get("scenario") != "server" and r.get("throughput_sps")]
    several = _models(cells) > 1
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in sorted(cells, key=lambda r: r["id"]):
        out.setdefault(_bench_label(r, several), {})[r["batch_size"]] = r
    return out


def _png(draw: Callable[[Any], None], width: float = 8, height: float = 4.5) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    draw(ax)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def throughput_vs_batch(records) -> Plot:
    title = "Inference throughput vs batch size"
    sweep = _sweep(records)
    if not sweep:
        return Plot(title, None, "no measured inference cells (offline or single-stream)")

    def draw(ax):
        for label, by_batch in sweep.items():
            xs = sorted(by_batch)
            ax.plot(xs, [by_batch[b]["throughput_sps"] for b in xs], marker="o", label=label)
        noisy = [(b, r["throughput_sps"]) for s in sweep.values() for b, r in s.items()
                 if r["status"] == "unstable"]
        if noisy:
            ax.scatter(*zip(*noisy), marker="x", s=90, color="#c00000", zorder=5,
                       label="unstable cell (CV over threshold)")
        batches = {b for s in sweep.values() for b in s}
        if max(batches) >= 4 * min(batches):
            ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(batches), [str(b) for b in sorted(batches)])
        ax.set_xlabel("batch size")
        ax.set_ylabel("throughput (samples/s)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    return Plot(title, _png(draw), "One point per batch size: the newest cell that measured it.")


def latency_throughput(records) -> Plot:
    title = "Latency vs throughput (p50)"
    sweep = _sweep(records)
    servers = [r for r in records if r["kind"] == "bench" and r["status"] != "failed"
               and ((r.get("metrics") or {}).get("server") or {}).get("points")]
    if not sweep and not servers:
        return Plot(title, None, "no measured inference cells or server-scenario points")
    several = _models(list(records)) > 1

    def draw(ax):
        for label, by_batch in sweep.items():
            pts = [(by_batch[b]["throughput_sps"],
                    ((by_batch[b].get("metrics") or {}).get("latency_ms") or {}).get("p50"))
                   for b in sorted(by_batch)]
            pts = [p for p in pts if p[1] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=f"{label}, batch sweep")
        for r in servers:
            pts = sorted((p["achieved_qps"], p["latency_ms"]["p50"])
                         for p in r["metrics"]["server"]["points"] if p.get("latency_ms"))
            if pts:
                ax.plot(*zip(*pts), marker="s", linestyle="--",
                        label=f"{_bench_label(r, several)}, server (max batch {r['batch_size']})")
        ax.set_xlabel("throughput (samples/s)")
        ax.set_ylabel("p50 latency (ms)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    return Plot(title, _png(draw), "Batch sweep: one point per batch size (latency of a "
                                   "batch). Server: one point per offered rate (latency per "
                                   "query, queueing included).")


def training_bars(records) -> Plot:
    title = "Training throughput per framework"
    cells = [r for r in records if r["kind"] == "train" and r["status"] == "ok"
             and r.get("throughput_sps")]
    if not cells:
        return Plot(title, None, "no successful training records")
    several = _models(cells) > 1
    newest: dict[str, float] = {}
    for r in sorted(cells, key=lambda r: r["id"]):
        fw = FRAMEWORKS.get(r.get("framework") or "")
        n = ((r.get("context") or {}).get("config") or {}).get("devices") or 1
        label = (f"{fw.display if fw else r.get('framework')}\n{r.get('device')} "
                 f"{r.get('precision')} bs{r.get('batch_size')}" + (f" x{n}" if n > 1 else ""))
        newest[f"{r.get('model')}\n{label}" if several else label] = r["throughput_sps"]
    return Plot(title, _png(lambda ax: _bars(ax, newest, title, "throughput (samples/s)")))


def best_batch_bars(records) -> Plot:
    title = "Backends at their best batch size"
    sweep = _sweep(records)
    if not sweep:
        return Plot(title, None, "no measured inference cells (offline or single-stream)")
    best = {}
    for label, by_batch in sweep.items():
        b = max(by_batch, key=lambda k: by_batch[k]["throughput_sps"])
        best[f"{label}\nbatch {b}"] = by_batch[b]["throughput_sps"]
    return Plot(title, _png(lambda ax: _bars(ax, best, title, "throughput (samples/s)")))


def _bars(ax, values: dict[str, float], title: str, ylabel: str) -> None:
    labels = list(values)
    bars = ax.bar(range(len(labels)), [values[k] for k in labels], color="#4878a8")
    ax.bar_label(bars, fmt="%.4g", fontsize=8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)


def all_plots(records: Sequence[dict[str, Any]]) -> list[Plot]:
    return [throughput_vs_batch(records), latency_throughput(records), training_bars(records),
            best_batch_bars(records)]
