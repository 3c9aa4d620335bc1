"""Tables in the seeds' layout, rendered as Markdown (GitHub pipes) or plain text."""
from __future__ import annotations

from typing import Any, Sequence

from harness.frameworks import FRAMEWORKS
from models.registry import get_model


def markdown(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([fmt(cells[0]), "| " + " | ".join("-" * w for w in widths) + " |",
                      *map(fmt, cells[1:])])


TRAIN_HEADERS = ("Network", "Framework", "Resource", "Precision", "Batch size",
                 "Throughput (images/sec)", "Step time median (p90)", "Warm-up",
                 "Loss first → last", "Peak RSS")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def train_rows(records: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for r in records:
        fw = FRAMEWORKS.get(r["framework"])
        framework = f"{fw.display if fw else r['framework']} {r.get('framework_version') or ''}"
        try:
            network = get_model(r["model"]).display_name
        except Exception:  # noqa: BLE001 - a record may outlive its model
            network = r["model"]
        m = r.get("metrics", {})
        resource = r.get("context", {}).get("resource") or r.get("device")
        rss = f"{r['peak_rss_mb']:.0f} MB" if r.get("peak_rss_mb") else ""
        if r["status"] != "ok":
            rows.append([network, framework.strip(), resource, r["precision"], r["batch_size"],
                         f"FAILED: {r.get('error')}", "", "", "", rss])
            continue
        st = m["step_time_s"]
        rows.append([
            network, framework.strip(), resource, r["precision"], r["batch_size"],
            f"{r['throughput_sps']:.2f}",
            f"{_ms(st['p50'])} ({_ms(st['p90'])})",
            f"{m['warmup_steps']} steps, {m['warmup_total_s']:.1f} s",
            f"{m['loss_start']:.3f} → {m['loss_end']:.3f}",
            rss,
        ])
    return rows


def train_table(records: Sequence[dict[str, Any]]) -> str:
    return markdown(TRAIN_HEADERS, train_rows(records))
