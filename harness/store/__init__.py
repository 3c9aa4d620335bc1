"""Where records are kept: one API (``harness.store.results.ResultStore``), two backends.

``sqlite``: one file, easy to ship next to a report, written atomically by the
stdlib.  ``postgres``: one shared server, for sweeps spread over many machines
(``--db postgresql://...``).  ``schema`` is what both share, so a record reads the
same from either: the tables, their version, how a record becomes a row.  Nothing
here imports a database driver: psycopg is imported only when a URL asks for it.
"""

from __future__ import annotations

from pathlib import Path

# The one default location; the PostgreSQL spool lives beside it (``postgres.spool_path``).
DEFAULT_DB = Path("results") / "dlbench.sqlite"


class Unreachable(Exception):
    """The server did not answer (refused, timed out, went away mid-statement): a write
    waits in the local spool instead of being lost.  A refusal (bad password, no such
    database) is a ``UserError`` instead: waiting would not cure it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
