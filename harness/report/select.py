"""Which stored records a report covers, and the machines they were measured on.

The database is opened read-only (``ResultStore.reading``): a report never creates,
upgrades or locks it for writing, so it works on a copy shipped next to a report
(read-only files included), on a PostgreSQL server through a role that may only read,
and a wrong path is an error, not a new empty database.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.store.results import ResultStore, decode_record

# Kinds a report has a table for; `peak` records only feed `percent_of_peak`.
REPORTED_KINDS = ("train", "bench", "micro", "convert", "verify", "profile")


def select(
    store: ResultStore, run_ids: Sequence[str] | None = None, model: str | None = None, latest: bool = False
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The records to report (oldest first) and ``{machine_id: fingerprint}`` for them."""
    path = store.path
    with store.reading() as db:
        known = [r["run_id"] for r in db.rows("SELECT run_id FROM records GROUP BY run_id ORDER BY MIN(id)")]
        if not known:
            raise UserError(f"results database {path} has no records")
        wanted = list(dict.fromkeys(run_ids or ()))
        missing = [r for r in wanted if r not in known]
        if missing:
            raise UserError(
                f"no run {missing[0]!r} in {path}; newest runs: {', '.join(reversed(known[-3:]))}"
            )
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
        records = [
            decode_record(r)
            for r in db.rows(f"SELECT * FROM records WHERE {' AND '.join(where)} ORDER BY id", params)
        ]
        scope = f"run {', '.join(wanted)}" if wanted else str(path)
        if not records and model:
            models = sorted(
                r["model"] for r in db.rows("SELECT DISTINCT model FROM records WHERE model IS NOT NULL")
            )
            raise UserError(
                f"no records of model {model!r} in {scope}; models in the database: "
                f"{', '.join(models) or 'none'}"
            )
        if not records:
            raise UserError(f"no training, inference or conversion records in {scope}")
        machines: dict[str, dict[str, Any]] = {}
        for mid in dict.fromkeys(r["machine_id"] for r in records):
            rows = db.rows("SELECT fingerprint FROM machines WHERE machine_id = ?", (mid,))
            machines[mid] = _fingerprint(rows[0]["fingerprint"]) if rows else {"machine_id": mid}
    return records, machines


def _fingerprint(text: str) -> dict[str, Any]:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def verdicts(store: ResultStore, records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """sha256 -> the newest ``artifacts`` row of each benchmarked file (read-only): a file
    found wrong after its benchmark is marked in the report too."""
    shas = sorted(
        {
            ((r.get("context") or {}).get("artifact") or {}).get("sha256")
            for r in records
            if r["kind"] == "bench"
        }
        - {None}
    )
    if not shas:
        return {}
    with store.reading() as db:
        if "artifacts" not in db.tables():
            return {}
        rows = db.rows(
            f"SELECT sha256, verified, hop, path, created_at, record_id FROM "
            f"artifacts WHERE sha256 IN ({', '.join('?' * len(shas))}) "
            f"ORDER BY id",
            shas,
        )
    return {r["sha256"]: {**r, "verified": bool(r["verified"])} for r in rows}
