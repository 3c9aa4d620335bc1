"""The results database: every measurement with the context that makes it mean something.

SQLite, because a single file is easy to ship next to a report and the stdlib
writes it atomically (one transaction per record).  The schema is the
project's contract with its users; it is documented in docs/results-schema.md
and versioned with ``PRAGMA user_version``.
"""
from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Iterable

from dlbench.models.atomic import check_can_create
from dlbench.models.errors import UserError

SCHEMA_VERSION = 1
DEFAULT_DB = Path("results") / "dlbench.sqlite"

# Columns a record carries at top level, in addition to id, context and metrics.
COLUMNS = (
    "run_id", "kind", "cell_key", "status", "error", "started_at", "duration_s",
    "model", "framework", "framework_version", "backend", "backend_version",
    "device", "precision", "batch_size", "scenario",
    "intra_op_threads", "inter_op_threads", "iterations", "warmup_iterations",
    "throughput_sps", "peak_rss_mb", "machine_id", "dlbench_version", "git_commit",
    "command_line",
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS machines (
    machine_id   TEXT PRIMARY KEY,
    fingerprint  TEXT NOT NULL,
    first_seen   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id             TEXT NOT NULL,
    kind               TEXT NOT NULL,
    cell_key           TEXT NOT NULL,
    status             TEXT NOT NULL,
    error              TEXT,
    started_at         TEXT NOT NULL,
    duration_s         REAL,
    model              TEXT,
    framework          TEXT,
    framework_version  TEXT,
    backend            TEXT,
    backend_version    TEXT,
    device             TEXT,
    precision          TEXT,
    batch_size         INTEGER,
    scenario           TEXT,
    intra_op_threads   INTEGER,
    inter_op_threads   INTEGER,
    iterations         INTEGER,
    warmup_iterations  INTEGER,
    throughput_sps     REAL,
    peak_rss_mb        REAL,
    machine_id         TEXT NOT NULL REFERENCES machines(machine_id),
    dlbench_version    TEXT,
    git_commit         TEXT,
    command_line       TEXT,
    context            TEXT NOT NULL,
    metrics            TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
CREATE INDEX IF NOT EXISTS records_cell ON records(cell_key, status);
CREATE TABLE IF NOT EXISTS artifacts (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    path           TEXT NOT NULL,
    sha256         TEXT NOT NULL,
    format         TEXT NOT NULL,
    precision      TEXT,
    model          TEXT,
    framework      TEXT,
    hop            TEXT,
    size_bytes     INTEGER,
    source_path    TEXT,
    source_sha256  TEXT,
    verified       INTEGER NOT NULL,
    verdict        TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    record_id      INTEGER REFERENCES records(id)
);
CREATE INDEX IF NOT EXISTS artifacts_sha ON artifacts(sha256);
"""

# Columns of an ``artifacts`` row (a converted file and its verification verdict).
ARTIFACT_COLUMNS = (
    "path", "sha256", "format", "precision", "model", "framework", "hop", "size_bytes",
    "source_path", "source_sha256", "verified", "verdict", "created_at", "record_id",
)


def sweep_store(db: str | os.PathLike | None, json_path: str | None = None) -> "ResultStore":
    """The store a sweep writes, opened before any cell runs, and its ``--json`` path
    checked creatable: a sweep fails on a bad path in its first second, not its last."""
    if json_path:
        check_can_create(json_path)
    store = ResultStore(db)
    store.check_writable()
    return store


def default_path() -> Path:
    return Path(os.environ.get("DLBENCH_DB") or DEFAULT_DB)


class ResultStore:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else default_path()

    def check_writable(self) -> None:
        """Fail before a long run, not after it: open (or create) the database."""
        self._connect().close()

    def _connect(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise UserError(f"cannot use {self.path} as the results database: it is a directory")
        if not self.path.exists():
            check_can_create(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            con = sqlite3.connect(self.path, timeout=60)
            con.row_factory = sqlite3.Row
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(f"{self.path} has results schema {version}; this dlbench "
                                f"reads up to {SCHEMA_VERSION}: upgrade dlbench")
            con.executescript(SCHEMA)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.OperationalError as exc:
            raise UserError(f"cannot write results database {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path} is not a dlbench results database ({exc})") from None
        return con

    def add(self, record: dict[str, Any], machine: dict[str, Any]) -> int:
        """Store one record (and its machine, once); return its id."""
        row = {c: record.get(c) for c in COLUMNS}
        row["machine_id"] = machine["machine_id"]
        row["context"] = json.dumps(record.get("context", {}), sort_keys=True, default=str)
        row["metrics"] = json.dumps(record.get("metrics", {}), sort_keys=True, default=str)
        names = list(row)
        with closing(self._connect()) as con, con:
            con.execute("INSERT OR IGNORE INTO machines VALUES (?, ?, datetime('now'))",
                        (machine["machine_id"], json.dumps(machine, sort_keys=True)))
            cur = con.execute(
                f"INSERT INTO records ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                [row[n] for n in names])
            return int(cur.lastrowid)

    def records(self, where: str = "1=1", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with closing(self._connect()) as con:
            rows = con.execute(f"SELECT * FROM records WHERE {where} ORDER BY id", tuple(params))
            return [decode_record(dict(r)) for r in rows]

    def finished_cell_keys(self, keys: Iterable[str], run_id: str | None = None) -> set[str]:
        """Which of ``keys`` already have a stored record that is not a failure.

        A resumed sweep skips these; failed cells are tried again.  Within one
        ``run_id`` (a resumed ``dlbench run``) every stored outcome counts, a
        failure included: the run already measured that cell, and measuring it
        again would give the run two records for one cell.
        """
        keys = list(keys)
        if not keys or not self.path.exists():
            return set()
        scope, extra = ("run_id = ?", [run_id]) if run_id else ("status != 'failed'", [])
        with closing(self._connect()) as con:
            found = set()
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                rows = con.execute(
                    f"SELECT DISTINCT cell_key FROM records WHERE {scope} AND "
                    f"cell_key IN ({', '.join('?' * len(chunk))})", extra + chunk)
                found.update(r[0] for r in rows)
        return found

    def add_artifact(self, artifact: dict[str, Any]) -> int:
        """Store one converted file with its verdict; return its row id.

        Rows are never updated: verifying a file again adds a row, and the
        newest row for a sha256 is what ``artifact`` returns.
        """
        row = {c: artifact.get(c) for c in ARTIFACT_COLUMNS}
        row["verified"] = 1 if artifact.get("verified") else 0
        row["verdict"] = json.dumps(artifact.get("verdict") or {}, sort_keys=True, default=str)
        names = list(row)
        with closing(self._connect()) as con, con:
            cur = con.execute(
                f"INSERT INTO artifacts ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                [row[n] for n in names])
            return int(cur.lastrowid)

    def artifacts(self, where: str = "1=1", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with closing(self._connect()) as con:
            rows = con.execute(f"SELECT * FROM artifacts WHERE {where} ORDER BY id", tuple(params))
            return [_decode_artifact(dict(r)) for r in rows]

    def artifact(self, sha256: str) -> dict[str, Any] | None:
        """The newest verdict on the file with this content, or None if never converted here."""
        if not self.path.exists():
            return None
        with closing(self._connect()) as con:
            row = con.execute("SELECT * FROM artifacts WHERE sha256 = ? ORDER BY id DESC LIMIT 1",
                              (sha256,)).fetchone()
        return _decode_artifact(dict(row)) if row else None

    def noise_floor(self, machine_id: str, threads: int | None = None) -> dict[str, Any] | None:
        """The newest ``noise_floor`` record of this machine (``dlbench compare --calibrate``)
        measured at ``threads`` intra-op threads, or None.  A record kind, not a table of its
        own: it carries the same context as every measurement (versions, thread settings, the
        cell it was measured with)."""
        if not self.path.exists():
            return None
        rows = self.records("kind = ? AND status = ? AND machine_id = ?",
                            ("noise_floor", "ok", machine_id))
        if threads is not None:
            rows = [r for r in rows if r.get("intra_op_threads") == threads]
        return rows[-1] if rows else None

    def machine(self, machine_id: str) -> dict[str, Any] | None:
        with closing(self._connect()) as con:
            row = con.execute("SELECT fingerprint FROM machines WHERE machine_id = ?",
                              (machine_id,)).fetchone()
        return json.loads(row[0]) if row else None


def decode_record(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as the record dict (JSON columns parsed); readers that open the file
    themselves (read-only reports) decode rows through this too."""
    row["context"] = json.loads(row["context"])
    row["metrics"] = json.loads(row["metrics"])
    return row


def _decode_artifact(row: dict[str, Any]) -> dict[str, Any]:
    row["verified"] = bool(row["verified"])
    row["verdict"] = json.loads(row["verdict"])
    return row
