"""The PostgreSQL backend: one shared store for sweeps spread over many machines.

Same tables and columns as SQLite (``schema.ddl`` respells the types), one
transaction per record, ids from an identity column: any number of machines
and processes add records at once.  The schema version is the one row of
``dlbench_schema``; it is created and upgraded under an advisory lock, so
machines starting together do not race to create the tables.

A server that goes away mid-sweep must not cost a measurement: a write that
cannot reach it goes to a local spool (an SQLite file with the same schema,
``spool_path``), and the first connection that succeeds later, from any
command in that directory, moves the spooled records into PostgreSQL.  A
server that refuses (bad password, no such database, a malformed URL) is a
``UserError`` at once: waiting would not cure it.  The password is masked in
every message.  psycopg is imported here only, when a URL asks for it.
"""

from __future__ import annotations

import hashlib
import re
import socket
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from dlbench.core.errors import UserError
from dlbench.harness.store import DEFAULT_DB, Unreachable, schema
from dlbench.harness.store.sqlite import SqliteBackend
from dlbench.harness.store.url import mask

VERSION_TABLE = "dlbench_schema"
# pg_advisory_xact_lock key of schema changes: any constant shared by every dlbench.
_MIGRATION_LOCK = 0x646C62656E6368  # "dlbench"
# Without a connect_timeout in the URL, a host that drops packets would hold a cell's
# record for the kernel's TCP timeout (minutes) before it reached the spool.
CONNECT_TIMEOUT_S = 10
# What a server that is down, restarting or out of reach says (psycopg gives no SQLSTATE
# for a failed connection: the message is all there is).
_GONE = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "timed out",
    "no route to host",
    "network is unreachable",
    "server closed the connection",
    "connection reset",
    "broken pipe",
    "shutting down",
    "starting up",
    "terminating connection",
    "failed to resolve host",
    "could not translate host",
    "connection is lost",
    "the connection is closed",
    "consuming input failed",
    "sending query failed",
    "ssl syscall error",
)
# Servers this process has reached (a read that fails after that reads the spool instead
# of ending a sweep), and those whose schema it has checked.
_REACHED: set[str] = set()
_READY: set[str] = set()


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise UserError(
            "a postgresql:// results database needs psycopg 3: pip install 'dlbench[postgres]'"
        ) from None
    return psycopg


def _pg(sql: str) -> str:
    """``?`` placeholders (shared with SQLite) in psycopg's spelling."""
    return sql.replace("%", "%%").replace("?", "%s")


class Session:
    """One connection, as every backend's session offers it to ``ResultStore``."""

    def __init__(self, con):
        self.con = con

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        return self.con.execute(_pg(sql), tuple(params)).fetchall()

    def execute(self, sql: str, params: Iterable[Any] = ()) -> None:
        self.con.execute(_pg(sql), tuple(params))

    def insert(self, table: str, row: dict[str, Any]) -> int:
        sql = _pg(schema.insert_sql(table, row)) + " RETURNING id"
        return int(self.con.execute(sql, list(row.values())).fetchone()["id"])

    def insert_absent(self, table: str, row: dict[str, Any], key: str) -> int | None:
        """``insert`` unless a finished row has the same ``key`` (None then).  READ COMMITTED
        lets two such statements both see no row, so the key is locked for the transaction
        first (``pg_advisory_xact_lock``): the second writer waits, then sees the first's."""
        self.con.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{table}:{row[key]}",))
        sql = _pg(schema.insert_absent_sql(table, row, key)) + " RETURNING id"
        got = self.con.execute(sql, [*row.values(), row[key]]).fetchone()
        return int(got["id"]) if got else None

    def tables(self) -> set[str]:
        return {
            r["table_name"]
            for r in self.rows(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        }


def spool_path(info: dict[str, Any]) -> Path:
    """Beside the default SQLite database, one file per machine and server: the results
    folder may be shared between machines (SQLite locks are unreliable on network file
    systems), and a spool must flush into the database it was meant for, not another."""
    target = "{}@{}:{}/{}".format(*(info.get(k, "") for k in ("user", "host", "port", "dbname")))
    digest = hashlib.sha256(target.encode()).hexdigest()[:8]
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", socket.gethostname()) or "host"
    return DEFAULT_DB.parent / f"pending-{host}-{digest}.sqlite"


class PostgresBackend:
    dialect = "postgresql"

    def __init__(self, location: str):
        psycopg = _psycopg()
        self.path = mask(location)  # what messages name: never the password
        self._url = location
        try:
            password = urlsplit(location).password
        except ValueError:
            password = None
        self._secrets = [s for s in {password, password and unquote(password)} if s]
        try:
            info = psycopg.conninfo.conninfo_to_dict(location)
        except psycopg.Error as exc:
            raise UserError(
                f"--db {self.path}: not a valid PostgreSQL URL ({self._scrub(' '.join(str(exc).split()))})"
            ) from None
        self._secrets += [s for s in {info.get("password")} if s]
        self._options = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "dlbench"}
        self._options = {k: v for k, v in self._options.items() if k not in info}
        self.spool = SqliteBackend(spool_path(info))

    def exists(self) -> bool:
        return True  # a server's database is there or refuses

    def check_writable(self) -> None:
        """Reached, schema checked, spool flushed; unreachable is an error here (at the start
        of a command), since nothing has been measured yet that the spool would save."""
        with self.session("check"):
            pass

    @contextmanager
    def session(self, mode: str = "read") -> Iterator[Session]:
        """``write``: one transaction.  ``read``: as a writer reads (schema created if
        missing).  ``readonly`` (reports): nothing created or migrated, so a role that may
        only read can report.  ``check``: ``check_writable``.  Every mode first moves what
        the spool holds into the server: a report right after an outage shows it too."""
        psycopg = _psycopg()
        try:
            con = psycopg.connect(self._url, row_factory=psycopg.rows.dict_row, **self._options)
        except psycopg.Error as exc:
            raise self._failure(exc, mode) from None
        _REACHED.add(self.path)
        try:
            if mode != "readonly":
                self._migrate(con)
            self._flush(con)
            if mode == "write":
                with con.transaction():
                    yield Session(con)
            else:
                yield Session(con)
        except psycopg.Error as exc:
            raise self._failure(exc, mode) from None
        finally:
            con.close()

    def _failure(self, exc: Exception, mode: str) -> Exception:
        """An ``Unreachable`` where the spool can stand in (writes; reads once the server
        was reached in this process, i.e. mid-sweep), else a one-line ``UserError``."""
        reason = self._scrub(" ".join(str(exc).split()))
        reason = reason.removeprefix("connection failed: ") or type(exc).__name__
        state = getattr(exc, "sqlstate", None) or ""
        gone = state.startswith(("08", "57P")) or (not state and any(g in reason.lower() for g in _GONE))
        if gone and (mode == "write" or (mode == "read" and self.path in _REACHED)):
            return Unreachable(reason)
        if gone:
            return UserError(f"cannot reach the results database {self.path}: {reason}")
        return UserError(f"cannot use the results database {self.path}: {reason}")

    def _scrub(self, text: str) -> str:
        """A driver's message with the password out of it, however it was quoted."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return mask(text)

    def _migrate(self, con) -> None:
        """Check (and create or upgrade) the schema once per process and server.  The fast
        path takes no lock and needs no CREATE right: a role that may only insert writes."""
        if self.path in _READY:
            return
        version = self._version(con)
        if version is None:  # never ours: nothing may be created beside someone else's tables
            found = con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            ).fetchall()
            schema.check_not_foreign(
                f"{self.path} (schema {con.execute('SELECT current_schema() AS s').fetchone()['s']})",
                {r["table_name"] for r in found},
                "a database or schema of its own (a new database, or ?options=-csearch_path%3DNAME)",
            )
        if version != schema.SCHEMA_VERSION:
            with con.transaction():
                con.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                con.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)")
                version = self._version(con)
                if version is None or version < schema.SCHEMA_VERSION:
                    for statement in schema.ddl(self.dialect):
                        con.execute(statement)
                    con.execute(f"DELETE FROM {VERSION_TABLE}")
                    con.execute(
                        f"INSERT INTO {VERSION_TABLE} (version) VALUES (%s)", (schema.SCHEMA_VERSION,)
                    )
        con.commit()
        _READY.add(self.path)

    def _version(self, con) -> int | None:
        present = con.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (VERSION_TABLE,)).fetchone()[
            "present"
        ]
        version = None
        if present:
            version = con.execute(f"SELECT max(version) AS v FROM {VERSION_TABLE}").fetchone()["v"]
        if version is not None and version > schema.SCHEMA_VERSION:
            raise UserError(
                f"{self.path} has results schema {version}; this dlbench "
                f"reads up to {schema.SCHEMA_VERSION}: upgrade dlbench"
            )
        return version

    def _flush(self, con) -> None:
        """Move what the spool holds into PostgreSQL: one transaction there, then the spool
        emptied, all under the spool's write lock (one flusher per machine).  A record that
        PostgreSQL already has (its commit was answered by a dropped connection) is not
        stored twice.  The file stays: a process about to spool may have it open."""
        if not self.spool.exists():
            return
        psycopg = _psycopg()
        try:
            moved = self._move_spool(con)
        except psycopg.Error as exc:
            failure = self._failure(exc, "write")
            if isinstance(failure, Unreachable):
                raise
            print(
                f"warning: the records kept in {self.spool.path} could not be stored in "
                f"{self.path} ({failure}); they stay there",
                file=sys.stderr,
            )
            return
        if moved:
            print(
                f"dlbench: moved {moved} record(s) kept in {self.spool.path} while the "
                f"server was unreachable into {self.path}",
                file=sys.stderr,
            )

    def _move_spool(self, con) -> int:
        with self.spool.session("write") as sp:
            records = sp.rows("SELECT * FROM records ORDER BY id")
            artifacts = sp.rows("SELECT * FROM artifacts ORDER BY id")
            if not records and not artifacts:
                return 0
            pg, ids = Session(con), {}
            with con.transaction():
                for m in sp.rows("SELECT * FROM machines"):
                    pg.execute(schema.ADD_MACHINE, (m["machine_id"], m["fingerprint"], m["first_seen"]))
                for r in records:
                    spooled = r.pop("id")
                    same = pg.rows(
                        "SELECT id FROM records WHERE run_id = ? AND cell_key = ? "
                        "AND started_at = ? AND metrics = ?",
                        (r["run_id"], r["cell_key"], r["started_at"], r["metrics"]),
                    )
                    ids[spooled] = same[0]["id"] if same else pg.insert("records", r)
                for a in artifacts:
                    a.pop("id")
                    a["record_id"] = ids.get(a["record_id"])
                    if not pg.rows(
                        "SELECT id FROM artifacts WHERE sha256 = ? AND path = ? AND created_at = ?",
                        (a["sha256"], a["path"], a["created_at"]),
                    ):
                        pg.insert("artifacts", a)
            for table in ("artifacts", "records", "machines"):
                sp.execute(f"DELETE FROM {table}")
        return len(records)
