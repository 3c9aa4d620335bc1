"""The roofline chart: each micro, layer and model cell under the ceilings measured on
its own device (the best GEMM of each precision, the best memory stream)."""

from __future__ import annotations

from dlbench.harness.report.figures import Plot, line_plots


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


def roofline(records) -> list[Plot]:
    """Arithmetic intensity (FLOPs per byte a call must move) against GFLOP/s, under the
    ceilings measured here, per device: the best GEMM of each precision (compute; bf16's
    and int8's lie above fp32's on a CPU with those instructions) and the best memory
    stream (bandwidth); each micro and layer cell placed by its own counts, and each
    bench cell of a counted graph by its FLOPs over its compulsory traffic.  Crowded, it
    is split by its groups of points (cell kind, backend, device, precision), each part
    under every ceiling."""
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
        return [
            Plot(
                title,
                None,
                "needs micro cells with FLOPs, a GEMM (the compute ceiling) "
                "and a memory stream (the bandwidth ceiling) on one device: "
                "dlbench micro gemm; dlbench micro memory",
            )
        ]

    groups: dict[tuple[str, ...], list[tuple[float, float]]] = {}
    for x, y, r in points:
        what = "model cells" if r["kind"] == "bench" else "micro cells"
        groups.setdefault((r["device"], what, r["backend"], r["precision"]), []).append((x, y))
    ridges = [peak / bw for peak, bw in roofs.values()]
    xs = [p[0] for p in points]
    lo, hi = min(xs + ridges) / 4, max(xs + ridges) * 4

    def draw(ax, labels: dict[tuple[str, ...], str]) -> None:
        for (device, precision), (peak, bw) in roofs.items():
            ax.plot(
                [lo, peak / bw, hi],
                [bw * lo, peak, peak],
                linewidth=2,
                linestyle="-" if precision == "fp32" else "--",
                label=f"{device} {precision} ceiling: {peak:.4g} GFLOP/s, {bw:.4g} GB/s",
            )
        for key, label in labels.items():
            marker = "^" if key[1] == "model cells" else "o"
            ax.scatter(*zip(*groups[key]), label=label, s=30, alpha=0.8, marker=marker)
        ax.set_xscale("log")
        ax.set_yscale("log")

    return line_plots(
        title,
        sorted(groups),
        draw,
        ("arithmetic intensity (FLOP per byte moved)", "GFLOP/s"),
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
