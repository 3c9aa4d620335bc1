"""How far a bench row is from the best ``dlbench tune`` found for the same thing.

"The same thing" is the model, machine, backend and precision: a tune's record of the best
throughput at that precision (any settings, any batch size), its newest.  The distance is
read when a table is drawn, never stored in the bench record: a tune run after the bench
still puts it in context.  A row more than ``BELOW`` under the tuned best is marked in
the report: its settings leave that much on the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BELOW = 0.05
MARK = "‡"
NOTE = (
    f"{MARK} More than {BELOW:.0%} below the best throughput dlbench tune measured for the same "
    "model, machine, backend and precision: other documented settings run it faster here "
    "(the tune's config reproduces them: dlbench bench --config)."
)


def _identity(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("model"), r.get("machine_id"), r.get("backend"), r.get("device"), r.get("precision"))


def tune_records(store: Any, where: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``ok`` tune records matching ``where``, oldest first, read without writing: a
    report and ``dlbench env`` leave the database's bytes as they were."""
    from dlbench.core.errors import UserError
    from dlbench.harness.store.schema import decode_record

    if not store.exists():
        return []
    try:
        with store.reading() as s:
            sql = f"SELECT * FROM records WHERE kind = 'tune' AND status = 'ok' AND {where} ORDER BY id"
            return [decode_record(r) for r in s.rows(sql, list(params))]
    except UserError:  # not a results database (yet)
        return []


def tuned_bests(store: Any, records: Sequence[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """identity -> the newest ``tune`` record for each identity among ``records``."""
    models = sorted({r["model"] for r in records if r.get("kind") == "bench" and r.get("model")})
    if not models:
        return {}
    rows = tune_records(store, f"model IN ({', '.join('?' * len(models))})", models)
    return {_identity(t): t for t in rows}  # ascending ids: the newest wins


def annotate(records: Sequence[dict[str, Any]], store: Any) -> None:
    """Give each measured bench row with a tuned best its ``headroom``: throughput over the
    tuned best's, minus one (-0.18: 18 % below)."""
    bests = tuned_bests(store, records)
    for r in records:
        t = bests.get(_identity(r))
        if t and r.get("kind") == "bench" and r["status"] != "failed" and r.get("throughput_sps"):
            r["headroom"] = {
                "vs_tuned": r["throughput_sps"] / t["throughput_sps"] - 1,
                "tuned_sps": t["throughput_sps"],
                "tune_run": t["run_id"],
            }


def text(r: dict[str, Any], mark: bool = False) -> str:
    """`` (−18 % vs tuned)``, with the mark where ``mark`` and it is more than BELOW under."""
    h = r.get("headroom")
    if not h:
        return ""
    pct = h["vs_tuned"] * 100
    flagged = mark and h["vs_tuned"] < -BELOW
    return f" ({'−' if pct < 0 else '+'}{abs(pct):.0f} % vs tuned{MARK if flagged else ''})"


def below(records: Sequence[dict[str, Any]]) -> bool:
    return any((r.get("headroom") or {}).get("vs_tuned", 0) < -BELOW for r in records)
