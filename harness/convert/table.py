"""The verification table that export, build and verify print (Markdown)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dlbench.harness.output.tables import markdown

HEADERS = (
    "Artifact",
    "Hop",
    "Precision",
    "Batches",
    "Output",
    "Max abs",
    "Max rel",
    "Mean abs",
    "Cosine (min)",
    "Top-1",
    "Nodes",
    "Size",
    "Time",
    "Verdict",
)


def _size(n: int | None) -> str:
    if not n:
        return ""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _g(x: float | None) -> str:
    return "" if x is None else f"{x:.3g}"


def _name(record: dict[str, Any]) -> str:
    ctx = record.get("context", {})
    path = (ctx.get("artifact") or ctx.get("candidate") or {}).get("path", "")
    if not path:
        return ""
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path


def rows(records: Sequence[dict[str, Any]]) -> list[list[Any]]:
    out = []
    for r in records:
        m = r.get("metrics", {})
        hop = r.get("context", {}).get("hop") or r["kind"]
        verdict = m.get("verdict") or {}
        time_s = m.get("convert_s") if r["kind"] == "convert" else m.get("verify_s")
        # An INT8 build's mode (static / dynamic) changes what it is: said beside it.
        mode = ((r.get("context") or {}).get("build_info") or {}).get("recipe", {}).get("mode")
        common = [
            _name(r),
            hop,
            (r.get("precision") or "") + (f" {mode}" if mode else ""),
            ",".join(map(str, verdict.get("batch_sizes", []))) or "",
        ]
        tail = [
            m.get("node_count") or "",
            _size(m.get("file_size_bytes")),
            f"{time_s:.1f} s" if time_s else "",
        ]
        outputs = verdict.get("outputs") or {}
        if r["status"] == "failed" or not outputs:
            out.append(
                common
                + ["", "", "", "", "", ""]
                + tail
                + [f"FAILED: {r.get('error') or verdict.get('message', '')}"]
            )
            continue
        for name, o in outputs.items():
            if verdict.get("judged", True) is False:
                status = "CANNOT JUDGE: the reference is the same for every input"
            else:
                status = "ok" if o["ok"] else "UNVERIFIED: " + "; ".join(o["failures"])
            top1 = "" if o.get("top1") is None else f"{o['top1']:.0%}"
            if o.get("top1") is not None and o.get("top1_judged") != o.get("top1_samples"):
                top1 += f" ({o['top1_judged']}/{o['top1_samples']})"  # near-ties not counted
            out.append(
                common
                + [name, _g(o["max_abs"]), _g(o["max_rel"]), _g(o["mean_abs"]), f"{o['cosine']:.6f}", top1]
                + tail
                + [status]
            )
    return out


def verification_table(records: Sequence[dict[str, Any]]) -> str:
    return markdown(HEADERS, rows(records))
