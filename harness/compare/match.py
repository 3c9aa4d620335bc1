"""Which baseline record measures the same cell as which candidate record.

Two records pair when they agree on everything that identifies a cell except
the axis being compared: comparing frameworks, the framework is allowed to
differ and nothing else is.  The machine is part of the cell unless the user
allows crossing machines.  When a side measured a cell more than once, its
newest ok record stands for it (newest unstable, then newest failed, when
there is no ok one), so a rerun replaces an earlier attempt.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

IDENTITY = (
    "kind",
    "model",
    "device",
    "precision",
    "batch_size",
    "scenario",
    "intra_op_threads",
    "inter_op_threads",
    "backend",
    "framework",
    "machine_id",
    "with",
    "mode",
    "devices",
    "scaling",
)
_STATUS_RANK = {"ok": 2, "unstable": 1}
# Identity kept in a record's context, not a column: the --with environment of a micro or
# layer cell (None: the installed packages), a layer's mode (forward or train), and a
# data-parallel training cell's device count and scaling mode (None: one plain process).
CONTEXT_FIELDS = ("with", "mode", "devices", "scaling")
# What follows from the compared axis and may differ with it: each of N devices gets its
# share of the cores.
FOLLOWS = {"devices": ("intra_op_threads",)}


def field(record: dict[str, Any], name: str) -> Any:
    context = record.get("context") or {}
    if name == "devices":
        return (context.get("topology") or {}).get("world_size")
    if name == "scaling":
        return (context.get("scaling") or {}).get("mode")
    if name in CONTEXT_FIELDS:
        return context.get(name)
    return record.get(name)


def cell_identity(record: dict[str, Any], ignore: Iterable[str] = ()) -> tuple:
    skip = set(ignore)
    return tuple((k, field(record, k)) for k in IDENTITY if k not in skip)


def newest_per_cell(
    records: Iterable[dict[str, Any]], ignore: Iterable[str] = ()
) -> dict[tuple, dict[str, Any]]:
    ignore = tuple(ignore)
    best: dict[tuple, dict[str, Any]] = {}
    for r in records:
        key = cell_identity(r, ignore)
        if key not in best or _rank(r) > _rank(best[key]):
            best[key] = r
    return best


def _rank(r: dict[str, Any]) -> tuple:
    return (_STATUS_RANK.get(r.get("status"), 0), r.get("started_at") or "", r.get("id") or 0)


def pair_cells(
    baseline: Iterable[dict[str, Any]], candidate: Iterable[dict[str, Any]], ignore: Iterable[str]
) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    """(pairs, baseline cells without a partner, candidate cells without a partner)."""
    a = newest_per_cell(baseline, ignore)
    b = newest_per_cell(candidate, ignore)
    pairs = [(a[k], b[k]) for k in sorted(a, key=_sort_key) if k in b]
    only_a = [a[k] for k in sorted(a, key=_sort_key) if k not in b]
    only_b = [b[k] for k in sorted(b, key=_sort_key) if k not in a]
    return pairs, only_a, only_b


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, 0 if v is None else v) for _, v in key)
