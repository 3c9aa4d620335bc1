"""Where each side's records come from: a run id, a `--json` file, or filters on the database.

Only `train` and `bench` records carry throughput; the rest of a run
(conversions, peaks) is left out here so that "nothing to compare" can say so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.compare import match
from dlbench.harness.store.results import ResultStore

COMPARABLE_KINDS = ("train", "bench", "micro")
AXES = ("framework", "backend", "with", "devices", "run")
# --with's value for the packages installed in dlbench's own environment.
INSTALLED = "installed"


@dataclass
class Filters:
    """Narrowing filters applied to both sides (None: any)."""

    model: str | None = None
    kind: str | None = None
    precision: str | None = None
    batch_size: int | None = None
    # Per side: column -> value, from an axis option given twice.
    baseline: dict[str, Any] = field(default_factory=dict)
    candidate: dict[str, Any] = field(default_factory=dict)

    def keep(self, record: dict[str, Any], side: dict[str, Any]) -> bool:
        if record.get("kind") not in COMPARABLE_KINDS:
            return False
        for col, want in (
            ("model", self.model),
            ("kind", self.kind),
            ("precision", self.precision),
            ("batch_size", self.batch_size),
        ):
            if want is not None and record.get(col) != want:
                return False
        return all(match.field(record, col) == want for col, want in side.items())


def axis_values(name: str, values: list[str] | None) -> tuple[str, str] | None:
    """An axis option is given twice (baseline, candidate) or not at all."""
    if not values:
        return None
    if len(values) != 2:
        raise UserError(
            f"--{name} was given {len(values)} time(s): give it exactly twice, "
            f"baseline first, then candidate (e.g. --{name} A --{name} B)"
        )
    return values[0], values[1]


def is_json_argument(arg: str) -> bool:
    return arg.endswith(".json") or os.sep in arg or Path(arg).is_file()


def load_json(path: str) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{path}: no such file (expected a --json file of dlbench train/bench or a run id)")
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is not a dlbench --json file: {exc}") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) and "kind" in r for r in data):
        raise UserError(f"{path} is not a dlbench --json file (a list of records)")
    if not data:
        raise UserError(f"{path} holds no records")
    return data


def load_run(store: ResultStore, run_id: str) -> list[dict[str, Any]]:
    records = store.records("run_id = ?", (run_id,))
    if not records:
        raise UserError(f"no run {run_id!r} in {store.path}")
    return records


def load_database(store: ResultStore) -> list[dict[str, Any]]:
    if not store.exists():
        raise UserError(f"no results database at {store.path} (set --db or $DLBENCH_DB)")
    records = store.records()
    if not records:
        raise UserError(f"the results database {store.path} is empty")
    return records


def load_sides(
    positionals: list[str], store: ResultStore, filters: Filters, runs: tuple[str, str] | None
) -> tuple[list[dict], list[dict]]:
    """Baseline and candidate records, filtered; raises UserError when a side is empty."""
    if positionals and runs:
        raise UserError("give BASELINE CANDIDATE or --run twice, not both")
    if len(positionals) not in (0, 2):
        raise UserError(f"give two sources (BASELINE CANDIDATE), not {len(positionals)}")
    if positionals or runs:
        names = positionals or list(runs)
        raw = [load_json(n) if positionals and is_json_argument(n) else load_run(store, n) for n in names]
    else:
        if not (filters.baseline or filters.candidate):
            raise UserError(
                "nothing to compare: give BASELINE CANDIDATE (run ids or --json "
                "files), or an axis option twice (--framework, --backend, --with, "
                "--devices, --run)"
            )
        if filters.baseline == filters.candidate:
            raise UserError("baseline and candidate select the same records: the axis values must differ")
        everything = load_database(store)
        raw = [everything, everything]
        names = [_describe(filters.baseline), _describe(filters.candidate)]
    sides = []
    for name, records, side in zip(names, raw, (filters.baseline, filters.candidate)):
        kept = [r for r in records if filters.keep(r, side)]
        if not kept:
            raise UserError(
                f"nothing to compare: no train, bench or micro records for {name}"
                f"{_describe_narrowing(filters)}"
            )
        sides.append(kept)
    return sides[0], sides[1]


def _describe(side: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in side.items())


def _describe_narrowing(f: Filters) -> str:
    parts = [
        f"{k}={v}"
        for k, v in (
            ("model", f.model),
            ("kind", f.kind),
            ("precision", f.precision),
            ("batch size", f.batch_size),
        )
        if v is not None
    ]
    return f" with {', '.join(parts)}" if parts else ""
