"""The report's charts: what each one plots, from which records, named by which fields.

A series is named by a tuple of fields (model, backend, device, precision, the
framework a converted file came from, a scenario other than offline/server, then
what the chart adds: a batch size, a server's max batch), so that ``figures``
can drop the fields a chart's series all share and split a crowded chart by model.
How a chart is laid out (legend, size, bars, splitting) is ``figures``' business.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness.output.tables import network_name
from dlbench.harness.report.figures import Plot, bar_plots, line_plots
from dlbench.harness.report.roofline import roofline

__all__ = ["Plot", "all_plots", "fields"]

Key = tuple[str, ...]
THROUGHPUT = "throughput (samples/s)"


def fields(r: dict[str, Any]) -> Key:
    """What one measured thing is, field by field: an ONNX file from PyTorch and one
    from TensorFlow differ by their "from" field."""
    source = r.get("framework") if r.get("framework") and r.get("framework") != r.get("backend") else ""
    scenario = r.get("scenario") if r.get("scenario") not in (None, "offline", "server") else ""
    return (
        network_name(r.get("model")) or "",
        r.get("backend") or "",
        r.get("device") or "",
        r.get("precision") or "",
        f"from {source}" if source else "",
        scenario or "",
    )


def _sweep(records: Sequence[dict[str, Any]]) -> dict[Key, dict[int, dict[str, Any]]]:
    """series -> batch size -> newest measured (not failed) loop-scenario record."""
    out: dict[Key, dict[int, dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: r["id"]):
        if (
            r["kind"] == "bench"
            and r["status"] != "failed"
            and r.get("scenario") != "server"
            and r.get("throughput_sps")
        ):
            out.setdefault(fields(r), {})[r["batch_size"]] = r
    return out


def throughput_vs_batch(records) -> list[Plot]:
    title = "Inference throughput vs batch size"
    sweep = _sweep(records)
    if not sweep:
        return [Plot(title, None, "no measured inference cells (offline or single-stream)")]

    def draw(ax, labels: dict[Key, str]) -> None:
        for key, label in labels.items():
            by_batch = sweep[key]
            xs = sorted(by_batch)
            ax.plot(xs, [by_batch[b]["throughput_sps"] for b in xs], marker="o", label=label)
        noisy = [
            (b, r["throughput_sps"])
            for key in labels
            for b, r in sweep[key].items()
            if r["status"] == "unstable"
        ]
        if noisy:
            ax.scatter(
                *zip(*noisy),
                marker="x",
                s=90,
                color="#c00000",
                zorder=1.5,  # behind the series' own marker, whose colour stays visible
                label="unstable cell (spread over threshold)",
            )
        batches = sorted({b for key in labels for b in sweep[key]})
        if batches[-1] >= 4 * batches[0]:
            ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(b) for b in batches])

    return line_plots(
        title,
        list(sweep),
        draw,
        ("batch size", THROUGHPUT),
        "One point per batch size: the newest cell that measured it.",
    )


def latency_throughput(records) -> list[Plot]:
    title = "Latency vs throughput (p50)"
    series: dict[Key, tuple[list[tuple[float, float]], dict[str, Any]]] = {}
    for key, by_batch in _sweep(records).items():
        cells = [by_batch[b] for b in sorted(by_batch)]
        lat = [((r.get("metrics") or {}).get("latency_ms") or {}).get("p50") for r in cells]
        pts = [(r["throughput_sps"], p) for r, p in zip(cells, lat) if p is not None]
        if pts:
            series[(*key, "batch sweep")] = (pts, {"marker": "o"})
    for r in records:
        points = ((r.get("metrics") or {}).get("server") or {}).get("points")
        if r["kind"] == "bench" and r["status"] != "failed" and points:
            pts = sorted((p["achieved_qps"], p["latency_ms"]["p50"]) for p in points if p.get("latency_ms"))
            if pts:
                key = (*fields(r), f"server, max batch {r['batch_size']}")
                series[key] = (pts, {"marker": "s", "linestyle": "--"})
    if not series:
        return [Plot(title, None, "no measured inference cells or server-scenario points")]

    def draw(ax, labels: dict[Key, str]) -> None:
        for key, label in labels.items():
            pts, style = series[key]
            ax.plot(*zip(*pts), label=label, **style)

    return line_plots(
        title,
        list(series),
        draw,
        ("throughput (samples/s)", "p50 latency (ms)"),
        "Batch sweep: one point per batch size (latency of a batch). Server: one point "
        "per offered rate (latency per query, queueing included).",
    )


def training_bars(records) -> list[Plot]:
    title = "Training throughput per framework"
    cells = [r for r in records if r["kind"] == "train" and r["status"] == "ok" and r.get("throughput_sps")]
    if not cells:
        return [Plot(title, None, "no successful training records")]
    newest: dict[Key, float] = {}
    for r in sorted(cells, key=lambda r: r["id"]):
        fw = FRAMEWORKS.get(r.get("framework") or "")
        n = ((r.get("context") or {}).get("config") or {}).get("devices") or 1
        key = (
            network_name(r.get("model")) or "",
            fw.display if fw else r.get("framework") or "",
            r.get("device") or "",
            r.get("precision") or "",
            f"bs{r.get('batch_size')}",
            f"x{n}" if n > 1 else "",
        )
        newest[key] = r["throughput_sps"]
    return bar_plots(title, newest, THROUGHPUT)


def best_batch_bars(records) -> list[Plot]:
    title = "Backends at their best batch size"
    sweep = _sweep(records)
    if not sweep:
        return [Plot(title, None, "no measured inference cells (offline or single-stream)")]
    best = {}
    for key, by_batch in sweep.items():
        b = max(by_batch, key=lambda k: by_batch[k]["throughput_sps"])
        best[(*key, f"batch {b}")] = by_batch[b]["throughput_sps"]
    return bar_plots(title, best, THROUGHPUT)


def all_plots(records: Sequence[dict[str, Any]]) -> list[Plot]:
    """Every chart in the report's order; a crowded one comes as several parts."""
    return [
        *throughput_vs_batch(records),
        *latency_throughput(records),
        *training_bars(records),
        *best_batch_bars(records),
        *roofline(records),
    ]
