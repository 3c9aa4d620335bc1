"""The profile's tables: where the time goes by op class, and the slowest nodes."""

from __future__ import annotations

from typing import Any

from dlbench.harness.output.tables import markdown

SLOWEST = 10


def profile_tables(record: dict[str, Any]) -> str:
    p = (record.get("metrics") or {}).get("profile")
    if not p:
        return f"{record.get('model')}: profile failed: {record.get('error')}"
    label = (record["context"].get("artifact") or {}).get("label")
    title = (
        f"Where the time goes: {record.get('model')} ({label}), "
        f"onnxruntime {record.get('backend_version')}, batch {p['batch_size']}, "
        f"{record.get('intra_op_threads')} threads: {p['wall_ms_per_run']:.3g} ms a run "
        f"({p['node_ms_per_run']:.3g} ms in {p['node_count']} nodes)"
    )
    classes = markdown(
        ("Op class", "Share", "ms / run", "Nodes", "Op types", "GFLOP / run", "GFLOP/s"),
        [
            [
                c["class"],
                f"{c['share']:.1%}",
                f"{c['ms_per_run']:.3g}",
                c["nodes"],
                ", ".join(c["ops"]),
                f"{c['gflop_per_run']:.3g}" if c["gflop_per_run"] else "",
                f"{c['gflops']:.3g}" if c.get("gflops") else "",
            ]
            for c in p["classes"]
        ],
    )
    nodes = markdown(
        ("Node", "Op", "Class", "Share", "µs / run"),
        [
            [n["node"], n["op"], n["class"], f"{n['share']:.1%}", f"{n['us']:.1f}"]
            for n in p["nodes"][:SLOWEST]
        ],
    )
    return f"{title}\n\n{classes}\n\nSlowest nodes:\n\n{nodes}"
