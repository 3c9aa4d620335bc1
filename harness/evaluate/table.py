"""The table ``dlbench eval`` prints (Markdown)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from dlbench.harness.output.tables import markdown

HEADERS = (
    "Artifact",
    "Model",
    "Source framework",
    "Backend",
    "Device",
    "Precision",
    "Split",
    "Samples",
    "Top-1 accuracy",
    "Loss",
    "Also",
    "Time",
)
# A task's own figures beside top-1 (harness.evaluate.scoring's tallies), when its tally gives them.
ALSO = {
    "map": "AP {:.3f}",
    "map50": "AP50 {:.3f}",
    "mean_top_iou": "top IoU {:.3f}",
    "mask_iou": "mask IoU {:.3f}",
    "auc": "AUC {:.4f}",
    "cer": "CER {:.3f}",
    "nsp_accuracy": "NSP {:.2%}",
}


def _where(path: str | None) -> str:
    if not path:
        return ""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def eval_table(records: Sequence[dict[str, Any]]) -> str:
    rows = []
    for r in records:
        art = r.get("context", {}).get("artifact", {})
        head = [
            _where(art.get("path")) or art.get("label"),
            r.get("model"),
            r.get("framework") or "",
            r.get("backend"),
            r.get("device"),
            r.get("precision"),
        ]
        e = r.get("metrics", {}).get("eval")
        if r["status"] != "ok" or not e:
            rows.append(head + ["", "", f"FAILED: {r.get('error')}", "", "", ""])
            continue
        acc = "-" if e.get("accuracy") is None else f"{100 * e['accuracy']:.2f} %"
        also = ", ".join(f.format(e[k]) for k, f in ALSO.items() if e.get(k) is not None)
        rows.append(head + [e["split"], e["samples"], acc, f"{e['loss']:.4f}", also, f"{e['time_s']:.2f} s"])
    return markdown(HEADERS, rows)
