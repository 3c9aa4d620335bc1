"""The profile's tables: where the time goes by op class, and the slowest nodes.

Any profiler's record reads the same; the columns of what only some profilers give (each
op's FLOPs and input bytes, the op a PyTorch node spent its time in) are shown where the
record has them.
"""

from __future__ import annotations

from typing import Any

from dlbench.harness.output.tables import counted, markdown

SLOWEST = 10
PARTIAL = "≥"  # a sum over some of a class's nodes: the others have no count


def _g(value: float | None, partial: bool = False) -> str:
    return f"{PARTIAL if partial else ''}{value:.3g}" if value else ""


def _filled(headers: list[str], rows: list[list[Any]]) -> str:
    """The table without the columns no row fills: a profiler that never names the op a
    node spent its time in (ONNX Runtime's) gets no empty "Spent in" column."""
    keep = [i for i in range(len(headers)) if any(r[i] not in ("", None) for r in rows)]
    keep = keep or list(range(len(headers)))  # no rows: the headers alone
    return markdown([headers[i] for i in keep], [[r[i] for i in keep] for r in rows])


def profile_tables(record: dict[str, Any]) -> str:
    p = (record.get("metrics") or {}).get("profile")
    if not p:
        return f"{record.get('model')}: profile failed: {record.get('error')}"
    label = (record["context"].get("artifact") or {}).get("label")
    on = f" on {record.get('device')} {record.get('precision')}" if record.get("device") != "cpu" else ""
    threads = record.get("intra_op_threads")
    title = (
        f"Where the time goes: {record.get('model')} ({label}), "
        f"{record.get('backend')} {record.get('backend_version')}{on}, batch {p['batch_size']}"
        + (f", {counted(threads, 'thread')}" if threads else "")
        + f": {p['wall_ms_per_run']:.3g} ms a run "
        f"({p['node_ms_per_run']:.3g} ms in {p['node_count']} nodes)"
        + (f"; {p['plain_ms_per_run']:.3g} ms a run unprofiled" if p.get("plain_ms_per_run") else "")
    )
    per_op = any("bytes_per_run" in c for c in p["classes"])  # the profiler counts per op
    headers = ["Op class", "Share", "ms / run", "Nodes", "Op types", "GFLOP / run", "GFLOP/s"]
    if per_op:
        headers += ["MB / run", "FLOP / B"]
    rows = []
    for c in p["classes"]:
        row = [
            c["class"],
            f"{c['share']:.1%}",
            f"{c['ms_per_run']:.3g}",
            c["nodes"],
            ", ".join(c["ops"]),
            _g(c["gflop_per_run"], c.get("flops_partial", False)),
            _g(c.get("gflops")),
        ]
        if per_op:
            mb = c["bytes_per_run"] / 1e6 if c["bytes_per_run"] is not None else None
            row += [_g(mb, c["bytes_partial"]), _g(c["flop_per_byte"])]
        rows.append(row)
    headers_n = ["Node", "Op", "Class", "Share", "µs / run"]
    if per_op:
        headers_n += ["Spent in", "GFLOP", "MB", "FLOP / B"]
    nodes = []
    for n in p["nodes"][:SLOWEST]:
        row = [n["node"], n["op"], n["class"], f"{n['share']:.1%}", f"{n['us']:.1f}"]
        if per_op:
            mb = n["bytes"] / 1e6 if n.get("bytes") is not None else None
            flops = n["flops"] / 1e9 if n.get("flops") is not None else None
            row += [n.get("kernel") or "", _g(flops), _g(mb), _g(n.get("flop_per_byte"))]
        nodes.append(row)
    text = f"{title}\n\n{_filled(headers, rows)}\n\nSlowest nodes:\n\n{_filled(headers_n, nodes)}"
    if per_op:
        text += (
            f"\n\nTimes: {p['node_time']}.  FLOPs: {p['flops_source']}; {PARTIAL}: a class with "
            f"uncounted ops, its GFLOP/s over the counted ones.  Bytes: {p['bytes_source']}."
        )
    return text
