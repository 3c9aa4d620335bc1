"""The SQLite backend: the default store, and the PostgreSQL store's local spool.

One connection per operation, one transaction per record: an interrupted sweep
leaves complete records only, and concurrent processes on one machine wait on
SQLite's lock (60 s) instead of failing.  The schema version is
``PRAGMA user_version``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dlbench.core.atomic import check_can_create
from dlbench.core.errors import UserError
from dlbench.harness.store import schema


class Session:
    """One connection, as every backend's session offers it to ``ResultStore``."""

    def __init__(self, con: sqlite3.Connection, tables: set[str] | None = None):
        self.con = con
        self._tables = tables

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.con.execute(sql, tuple(params))]

    def execute(self, sql: str, params: Iterable[Any] = ()) -> None:
        self.con.execute(sql, tuple(params))

    def insert(self, table: str, row: dict[str, Any]) -> int:
        return int(self.con.execute(schema.insert_sql(table, row), list(row.values())).lastrowid)

    def insert_absent(self, table: str, row: dict[str, Any], key: str) -> int | None:
        """``insert`` unless a finished row has the same ``key`` (None then); atomic under
        the write session's BEGIN IMMEDIATE."""
        cur = self.con.execute(schema.insert_absent_sql(table, row, key), [*row.values(), row[key]])
        return int(cur.lastrowid) if cur.rowcount else None

    def tables(self) -> set[str]:
        if self._tables is None:
            self._tables = {
                r["name"] for r in self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        return self._tables


class SqliteBackend:
    dialect = "sqlite"
    spool = None  # a local file is never out of reach

    def __init__(self, path: Path):
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def check_writable(self) -> None:
        self._connect().close()

    @contextmanager
    def session(self, mode: str = "read") -> Iterator[Session]:
        """``read`` and ``write`` open the database as a writer would (created, migrated);
        ``write`` also holds the write lock from the start, so reading then writing (a
        spool being flushed) never has to upgrade a lock another process holds.
        ``readonly`` never creates, upgrades or locks it for writing: a report works on a
        copy shipped next to it, read-only files included, and a wrong path is an error,
        not a new empty database."""
        if mode == "readonly":
            con = self._open_readonly()
            with closing(con):
                yield Session(con, self._read_tables(con))
            return
        with closing(self._connect()) as con:
            if mode == "write":
                con.execute("BEGIN IMMEDIATE")
                with con:
                    yield Session(con)
            else:
                yield Session(con)

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
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            try:
                schema.check_not_foreign(str(self.path), tables, "a database of its own (--db NEW.sqlite)")
            except UserError:
                con.close()
                raise
            if version > schema.SCHEMA_VERSION:
                raise UserError(
                    f"{self.path} has results schema {version}; this dlbench "
                    f"reads up to {schema.SCHEMA_VERSION}: upgrade dlbench"
                )
            con.executescript(";\n".join(schema.ddl(self.dialect)) + ";")
            con.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")
        except sqlite3.OperationalError as exc:
            raise UserError(f"cannot write results database {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path} is not a dlbench results database ({exc})") from None
        return con

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise UserError(f"results database {self.path} does not exist")
        if self.path.is_dir():
            raise UserError(f"cannot use {self.path} as the results database: it is a directory")
        try:
            con = sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True, timeout=60)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path} is not a dlbench results database ({exc})") from None
        con.row_factory = sqlite3.Row
        return con

    def _read_tables(self, con: sqlite3.Connection) -> set[str]:
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            con.close()
            raise UserError(f"{self.path} is not a dlbench results database ({exc})") from None
