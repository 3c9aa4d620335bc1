"""The report's charts as PNG bytes.

matplotlib is imported only when a chart is drawn, and through ``Figure`` and the
Agg canvas directly: no pyplot global state, no display needed, no backend switch
that could surprise a caller that has its own.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlbench.harness.machine.frameworks import FRAMEWORKS
from dlbench.harness.output.tables import network_name


@dataclass
class Plot:
    title: str
    png: bytes | None  # None: nothing to draw
    note: str = ""  # why it was skipped, or how to read it


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
    cells = [
        r
        for r in records
        if r["kind"] == "bench"
        and r["status"] != "failed"
        and r.get("scenario") != "server"
        and r.get("throughput_sps")
    ]
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


def _labels(ax, title: str, xlabel: str, ylabel: str, legend_size: int = 8) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=legend_size)


def throughput_vs_batch(records) -> Plot:
    title = "Inference throughput vs batch size"
    sweep = _sweep(records)
    if not sweep:
        return Plot(title, None, "no measured inference cells (offline or single-stream)")

    def draw(ax):
        for label, by_batch in sweep.items():
            xs = sorted(by_batch)
            ax.plot(xs, [by_batch[b]["throughput_sps"] for b in xs], marker="o", label=label)
        noisy = [
            (b, r["throughput_sps"])
            for s in sweep.values()
            for b, r in s.items()
            if r["status"] == "unstable"
        ]
        if noisy:
            ax.scatter(
                *zip(*noisy),
                marker="x",
                s=90,
                color="#c00000",
                zorder=5,
                label="unstable cell (CV over threshold)",
            )
        batches = {b for s in sweep.values() for b in s}
        if max(batches) >= 4 * min(batches):
            ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(batches), [str(b) for b in sorted(batches)])
        _labels(ax, title, "batch size", "throughput (samples/s)")

    return Plot(title, _png(draw), "One point per batch size: the newest cell that measured it.")


def latency_throughput(records) -> Plot:
    title = "Latency vs throughput (p50)"
    sweep = _sweep(records)
    servers = [
        r
        for r in records
        if r["kind"] == "bench"
        and r["status"] != "failed"
        and ((r.get("metrics") or {}).get("server") or {}).get("points")
    ]
    if not sweep and not servers:
        return Plot(title, None, "no measured inference cells or server-scenario points")
    several = _models(list(records)) > 1

    def draw(ax):
        for label, by_batch in sweep.items():
            pts = [
                (
                    by_batch[b]["throughput_sps"],
                    ((by_batch[b].get("metrics") or {}).get("latency_ms") or {}).get("p50"),
                )
                for b in sorted(by_batch)
            ]
            pts = [p for p in pts if p[1] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=f"{label}, batch sweep")
        for r in servers:
            pts = sorted(
                (p["achieved_qps"], p["latency_ms"]["p50"])
                for p in r["metrics"]["server"]["points"]
                if p.get("latency_ms")
            )
            if pts:
                ax.plot(
                    *zip(*pts),
                    marker="s",
                    linestyle="--",
                    label=f"{_bench_label(r, several)}, server (max batch {r['batch_size']})",
                )
        _labels(ax, title, "throughput (samples/s)", "p50 latency (ms)")

    return Plot(
        title,
        _png(draw),
        "Batch sweep: one point per batch size (latency of a "
        "batch). Server: one point per offered rate (latency per "
        "query, queueing included).",
    )


def training_bars(records) -> Plot:
    title = "Training throughput per framework"
    cells = [r for r in records if r["kind"] == "train" and r["status"] == "ok" and r.get("throughput_sps")]
    if not cells:
        return Plot(title, None, "no successful training records")
    several = _models(cells) > 1
    newest: dict[str, float] = {}
    for r in sorted(cells, key=lambda r: r["id"]):
        fw = FRAMEWORKS.get(r.get("framework") or "")
        n = ((r.get("context") or {}).get("config") or {}).get("devices") or 1
        label = (
            f"{fw.display if fw else r.get('framework')}\n{r.get('device')} "
            f"{r.get('precision')} bs{r.get('batch_size')}" + (f" x{n}" if n > 1 else "")
        )
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


def ceilings(cells) -> dict[tuple[str, str], tuple[float, float]]:
    """(device, precision) -> (its best GEMM's GFLOP/s, the device's best stream's GB/s),
    for the devices that have both: a ceiling is what was measured on that device."""
    streams: dict[str, float] = {}
    gemms: dict[tuple[str, str], float] = {}
    for r in cells:
        kind = r["context"]["op"]["kind"]
        if kind == "memory" and r["metrics"].get("gbps"):
            streams[r["device"]] = max(streams.get(r["device"], 0.0), r["metrics"]["gbps"])
        elif kind == "gemm" and r["metrics"].get("gflops"):
            key = (r["device"], r["precision"])
            gemms[key] = max(gemms.get(key, 0.0), r["metrics"]["gflops"])
    return {k: (v, streams[k[0]]) for k, v in sorted(gemms.items()) if k[0] in streams}


def _model_point(r) -> tuple[float, float] | None:
    """A bench cell's (FLOP per compulsory byte, achieved GFLOP/s), where its graph was
    counted (``bench.flops``: weights once a batch, inputs and outputs)."""
    from dlbench.harness.bench.flops import compulsory_bytes_per_sample

    m = r.get("metrics") or {}
    g = m.get("gflops_per_sample")
    b = compulsory_bytes_per_sample(m.get("flops") or {}, r["batch_size"])
    if not (g and b and m.get("achieved_gflops")):
        return None
    return g * 1e9 / b, m["achieved_gflops"]


def roofline(records) -> Plot:
    """Arithmetic intensity (FLOPs per byte a call must move) against GFLOP/s, under the
    ceilings measured here, per device: the best GEMM of each precision (compute; bf16's
    and int8's lie above fp32's on a CPU with those instructions) and the best memory
    stream (bandwidth); each micro and layer cell placed by its own counts, and each
    bench cell of a counted graph by its FLOPs over its compulsory traffic."""
    title = "Roofline (micro, layer and model cells)"
    cells = [r for r in records if r["kind"] == "micro" and r["status"] != "failed"]
    points = [
        (r["metrics"]["flops_per_call"] / r["metrics"]["bytes_per_call"], r["metrics"]["gflops"], r)
        for r in cells
        if r["metrics"].get("gflops")
    ]
    points += [
        (*pt, r)
        for r in records
        if r["kind"] == "bench" and r["status"] != "failed" and (pt := _model_point(r)) is not None
    ]
    roofs = ceilings(cells)
    if not points or not roofs:
        return Plot(
            title,
            None,
            "needs micro cells with FLOPs, a GEMM (the compute ceiling) "
            "and a memory stream (the bandwidth ceiling) on one device: "
            "dlbench micro gemm; dlbench micro memory",
        )

    def draw(ax):
        ridges = [peak / bw for peak, bw in roofs.values()]
        xs = [p[0] for p in points]
        lo, hi = min(xs + ridges) / 4, max(xs + ridges) * 4
        for (device, precision), (peak, bw) in roofs.items():
            ridge = peak / bw
            ax.plot(
                [lo, ridge, hi],
                [bw * lo, peak, peak],
                linewidth=2,
                linestyle="-" if precision == "fp32" else "--",
                label=f"{device} {precision} ceiling: {peak:.4g} GFLOP/s, {bw:.4g} GB/s",
            )
        groups: dict[str, list[tuple[float, float]]] = {}
        for x, y, r in points:
            what = "model " if r["kind"] == "bench" else ""
            groups.setdefault(f"{what}{r['backend']} {r['device']} {r['precision']}", []).append((x, y))
        for label, pts in sorted(groups.items()):
            ax.scatter(
                *zip(*pts), label=label, s=30, alpha=0.8, marker="^" if label.startswith("model ") else "o"
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        _labels(ax, title, "arithmetic intensity (FLOP per byte moved)", "GFLOP/s", 7)

    return Plot(
        title,
        _png(draw),
        "Each point is one cell. Each device and precision "
        "with a GEMM cell has its own compute ceiling (its best "
        "GEMM here), under that device's best memory stream. "
        "Model cells (triangles) count their ONNX graph's "
        "FLOPs over its compulsory traffic (weights once a "
        "batch, inputs, outputs): a lower bound on the bytes, "
        "so a model sits at or right of its true intensity; "
        "native-framework cells have no graph count and are "
        "not placed.",
    )


def all_plots(records: Sequence[dict[str, Any]]) -> list[Plot]:
    return [
        throughput_vs_batch(records),
        latency_throughput(records),
        training_bars(records),
        best_batch_bars(records),
        roofline(records),
    ]
