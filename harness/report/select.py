"""Which stored records a report covers, and the machines they were measured on.

The database is opened read-only: a report never creates, upgrades or locks it
for writing, so it works on a copy shipped next to a report (read-only files
included), and a wrong path is an error, not a new empty database.
"""
from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from dlbench.models.errors import UserError
from dlbench.harness.results import ResultStore, decode_record

# Kinds a report has a table for; `peak` records only feed `percent_of_peak`.
REPORTED_KINDS = ("train", "bench", "micro", "convert", "verify")


def _open(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise UserError(f"results database {path} does not exist")
    if path.is_dir():
        raise UserError(f"cannot use {path} as the results database: it is a directory")
    try:
        con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=60)
        con.row_factory = sqlite3.Row
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{path} is not a dlbench results database ({exc})") from None
    if not {"records", "machines"} <= tables:
        con.close()
        raise UserError(f"results database {path} has no records"
                        + ("" if not tables else " (it is not a dlbench results database)"))
    return con


def select(store: ResultStore, run_ids: Sequence[str] | None = None, model: str | None = None,
           latest: bool = False) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The records to report (oldest first) and ``{machine_id: fingerprint}`` for them."""
    path = store.path
    with closing(_open(path)) as con:
        known = [r[0] for r in con.execute(
            "SELECT run_id FROM records GROUP BY run_id ORDER BY MIN(id)")]
        if not known:
            raise UserError(f"results database {path} has no records")
        wanted = list(dict.fromkeys(run_ids or ()))
        missing = [r for r in wanted if r not in known]
        if missing:
            raise UserError(f"no run {missing[0]!r} in {path}; newest runs: "
                            f"{', '.join(reversed(known[-3:]))}")
        if latest:
            wanted = [max(wanted, key=known.index)] if wanted else [known[-1]]
        kinds = ", ".join(f"'{k}'" for k in REPORTED_KINDS)
        where, params = [f"kind IN ({kinds})"], []
        if wanted:
            where.append(f"run_id IN ({', '.join('?' * len(wanted))})")
            params += wanted
        if model:
            where.append("model = ?")
            params.append(model)
        records = [decode_record(dict(r)) for r in con.execute(
            f"SELECT * FROM records WHERE {' AND '.join(where)} ORDER BY id", params)]
        scope = f"run {', '.join(wanted)}" if wanted else str(path)
        if not records and model:
            models = sorted(r[0] for r in con.execute(
                "SELECT DISTINCT model FROM records WHERE model IS NOT NULL"))
            raise UserError(f"no records of model {model!r} in {scope}; models in the database: "
                            f"{', '.join(models) or 'none'}")
        if not records:
            raise UserError(f"no training, inference or conversion records in {scope}")
        machines: dict[str, dict[str, Any]] = {}
        for mid in dict.fromkeys(r["machine_id"] for r in records):
            row = con.execute("SELECT fingerprint FROM machines WHERE machine_id = ?",
                              (mid,)).fetchone()
            machines[mid] = _fingerprint(row[0]) if row else {"machine_id": mid}
    return records, machines


def _fingerprint(text: str) -> dict[str, Any]:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def verdicts(store: ResultStore, records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """sha256 -> the newest ``artifacts`` row of each benchmarked file (read-only): a file
    found wrong after its benchmark is marked in the report too."""
    shas = sorted({((r.get("context") or {}).get("artifact") or {}).get("sha256")
                   for r in records if r["kind"] == "bench"} - {None})
    if not shas:
        return {}
    with closing(_open(store.path)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "artifacts" not in tables:
            return {}
        rows = con.execute(f"SELECT sha256, verified, hop, path, created_at, record_id FROM "
                           f"artifacts WHERE sha256 IN ({', '.join('?' * len(shas))}) "
                           f"ORDER BY id", shas).fetchall()
    return {r["sha256"]: {**dict(r), "verified": bool(r["verified"])} for r in rows}
