"""The results database: every measurement with the context that makes it mean something.

One API over two backends (``harness.store``): an SQLite file by default, because a
single file is easy to ship next to a report and the stdlib writes it atomically
(one transaction per record); or a PostgreSQL server (``--db postgresql://...`` or
``$DLBENCH_DB``) that many machines fill at once.  The schema is the project's
contract with its users; it is documented in docs/results-schema.md and
versioned (SQLite's ``PRAGMA user_version``, PostgreSQL's ``dlbench_schema``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dlbench.core.atomic import check_can_create
from dlbench.core.errors import UserError
from dlbench.harness.store import DEFAULT_DB, Unreachable, url
from dlbench.harness.store.schema import (
    ADD_MACHINE,
    ARTIFACT_COLUMNS,
    COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    artifact_row,
    decode_artifact,
    decode_record,
    machine_row,
    record_row,
)
from dlbench.harness.store.sqlite import SqliteBackend

__all__ = [
    "ARTIFACT_COLUMNS",
    "COLUMNS",
    "DEFAULT_DB",
    "SCHEMA",
    "SCHEMA_VERSION",
    "ResultStore",
    "decode_record",
    "default_db",
    "sweep_store",
]


def sweep_store(db: str | os.PathLike | None, json_path: str | None = None) -> ResultStore:
    """The store a sweep writes, opened before any cell runs, and its ``--json`` path
    checked creatable: a sweep fails on a bad path in its first second, not its last."""
    if json_path:
        check_can_create(json_path)
    store = ResultStore(db)
    store.check_writable()
    return store


def default_db() -> str:
    return os.environ.get("DLBENCH_DB") or str(DEFAULT_DB)


class ResultStore:
    """``ResultStore(path)`` with a file path, a ``postgresql://`` URL, or None for
    ``$DLBENCH_DB`` (either kind) or ``results/dlbench.sqlite``.

    ``path`` is what messages name: the SQLite file's ``Path``, or the URL with its
    password masked.  SQL fragments callers pass (``records(where, params)``) use ``?``
    placeholders on either backend.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        location = str(path) if path else default_db()
        if url.is_url(location):
            from dlbench.harness.store.postgres import PostgresBackend

            self._backend = PostgresBackend(location.strip())
        else:
            self._backend = SqliteBackend(Path(location))
        self.path = self._backend.path
        self._read_from_spool = False

    def check_writable(self) -> None:
        """Fail before a long run, not after it: open (or create) the database."""
        self._backend.check_writable()

    def exists(self) -> bool:
        """Whether there is anything to read (a missing file is not created by looking)."""
        return self._backend.exists()

    def add(self, record: dict[str, Any], machine: dict[str, Any], only_if_absent: bool = False) -> int:
        """Store one record (and its machine, once); return its id.  A record the server
        could not take is kept in the local spool: its id is then negative (the spool's,
        negated) and ``record["spooled_to"]`` says where it waits.

        ``only_if_absent`` (a resumed sweep): a finished record of the same cell key stored
        meanwhile by another writer wins; nothing is added and the id is 0.  Four
        concurrent ``bench --resume`` on one database stored every cell four times."""
        row = record_row(record, machine)

        def work(s) -> int:
            s.execute(ADD_MACHINE, machine_row(machine))
            if only_if_absent and row.get("cell_key") and row.get("status") != "failed":
                return s.insert_absent("records", row, "cell_key") or 0
            return s.insert("records", row)

        rid = self._write(work, f"record of {record.get('kind')} cell {record.get('cell_key')}")
        if rid < 0:
            record["spooled_to"] = str(self._backend.spool.path)
        return rid

    def add_artifact(self, artifact: dict[str, Any]) -> int:
        """Store one converted file with its verdict; return its row id.

        Rows are never updated: verifying a file again adds a row, and the
        newest row for a sha256 is what ``artifact`` returns.  The row of a spooled
        record (negative id) waits in the spool with it, to be linked when both move.
        """
        row = artifact_row(artifact)
        if (row["record_id"] or 0) < 0:
            row["record_id"] = -row["record_id"]
            return -self._spool_write(lambda s: s.insert("artifacts", row))
        return self._write(lambda s: s.insert("artifacts", row), f"artifact {row['sha256']}")

    def records(self, where: str = "1=1", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        sql = f"SELECT * FROM records WHERE {where} ORDER BY id"
        return [decode_record(r) for r in self._read(lambda s: s.rows(sql, params), [])]

    def finished_cell_keys(self, keys: Iterable[str], run_id: str | None = None) -> set[str]:
        """Which of ``keys`` already have a stored record that is not a failure.

        A resumed sweep skips these; failed cells are tried again.  Within one
        ``run_id`` (a resumed ``dlbench run``) every stored outcome counts, a
        failure included: the run already measured that cell, and measuring it
        again would give the run two records for one cell.
        """
        keys = list(keys)
        if not keys:
            return set()
        scope, extra = ("run_id = ?", [run_id]) if run_id else ("status != 'failed'", [])

        def work(s) -> set[str]:
            found = set()
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                found.update(
                    r["cell_key"]
                    for r in s.rows(
                        f"SELECT DISTINCT cell_key FROM records WHERE {scope} AND "
                        f"cell_key IN ({', '.join('?' * len(chunk))})",
                        extra + chunk,
                    )
                )
            return found

        return self._read(work, set())

    def artifacts(self, where: str = "1=1", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        sql = f"SELECT * FROM artifacts WHERE {where} ORDER BY id"
        return [decode_artifact(r) for r in self._read(lambda s: s.rows(sql, params), [])]

    def artifact(self, sha256: str) -> dict[str, Any] | None:
        """The newest verdict on the file with this content, or None if never converted here."""
        rows = self._read(
            lambda s: s.rows("SELECT * FROM artifacts WHERE sha256 = ? ORDER BY id DESC LIMIT 1", (sha256,)),
            [],
        )
        return decode_artifact(rows[0]) if rows else None

    def noise_floor(self, machine_id: str, threads: int | None = None) -> dict[str, Any] | None:
        """The newest ``noise_floor`` record of this machine (``dlbench compare --calibrate``)
        measured at ``threads`` intra-op threads, or None.  A record kind, not a table of its
        own: it carries the same context as every measurement (versions, thread settings, the
        cell it was measured with)."""
        rows = self.records("kind = ? AND status = ? AND machine_id = ?", ("noise_floor", "ok", machine_id))
        if threads is not None:
            rows = [r for r in rows if r.get("intra_op_threads") == threads]
        return rows[-1] if rows else None

    def machine(self, machine_id: str) -> dict[str, Any] | None:
        rows = self._read(
            lambda s: s.rows("SELECT fingerprint FROM machines WHERE machine_id = ?", (machine_id,)), []
        )
        return json.loads(rows[0]["fingerprint"]) if rows else None

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """A read-only session for reports (``rows(sql, params)``, ``tables()``): it never
        creates, upgrades or locks the database, so a report works on a copy shipped next
        to it, and a wrong path or an empty server is an error, not a new database."""
        with self._backend.session("readonly") as s:
            tables = s.tables()
            if not {"records", "machines"} <= tables:
                raise UserError(
                    f"results database {self.path} has no records"
                    + ("" if not tables else " (it is not a dlbench results database)")
                )
            yield s

    def _write(self, work: Callable[[Any], int], what: str) -> int:
        try:
            with self._backend.session("write") as s:
                return work(s)
        except sqlite3.OperationalError as exc:  # the transaction is rolled back: nothing half-stored
            if "full" in str(exc) or "I/O" in str(exc):
                raise UserError(
                    f"cannot store the {what} in {self.path}: {exc} (nothing of it was stored)"
                ) from None
            raise
        except Unreachable as exc:
            rid = -self._spool_write(work)
            print(
                f"warning: results database {self.path} unreachable ({exc.reason}): {what} "
                f"kept in {self._backend.spool.path}; it moves to the server at the next "
                f"successful connection",
                file=sys.stderr,
            )
            return rid

    def _spool_write(self, work: Callable[[Any], int]) -> int:
        with self._backend.spool.session("write") as s:
            return work(s)

    def _read(self, work: Callable[[Any], Any], empty: Any) -> Any:
        """``work`` on the database; mid-sweep, with the server gone, on the spool, so the
        cell being stored is not lost to a lookup (its peak, its artifact's verdict)."""
        if not self._backend.exists():
            return empty
        try:
            with self._backend.session("read") as s:
                return work(s)
        except Unreachable as exc:
            spool = self._backend.spool
            if not self._read_from_spool:
                self._read_from_spool = True
                print(
                    f"warning: results database {self.path} unreachable ({exc.reason}): "
                    f"reading only what {spool.path} holds until it is back",
                    file=sys.stderr,
                )
            if not spool.exists():
                return empty
            with spool.session("read") as s:
                return work(s)
