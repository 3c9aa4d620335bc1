"""Identity and context shared by every kind of record (train, bench, convert)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from dlbench.core.flags import Flag, field_of, flag

# A run id set here is used by every command: `dlbench run` sets it so that the
# records of all its stages (and of all its resumptions) form one run, and a
# shell script can export it so that its steps report as one run too.
RUN_ID_ENV = "DLBENCH_RUN_ID"


def new_run_id() -> str:
    """One id per CLI invocation (or per $DLBENCH_RUN_ID): sortable by time, unique across machines."""
    fixed = os.environ.get(RUN_ID_ENV, "").strip()
    if fixed:
        return fixed
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed, a database URL's password masked: records and run.json keep it,
    and a shared results database must not hand out the credentials it was written with."""
    from dlbench.harness.store.url import mask

    return mask(shlex.join(["dlbench", *(sys.argv[1:] if argv is None else argv)]))


def cell_key(kind: str, identity: dict[str, Any]) -> str:
    """Two cells with the same key measure the same thing on the same machine."""
    blob = json.dumps({"kind": kind, **identity}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# The flags of where results go, said alike by every command that stores records.
OUTPUT = "output"
DB = Flag(("--db",), group=OUTPUT, help="results database (default $DLBENCH_DB or results/dlbench.sqlite)")
JSON_RECORDS = Flag(("--json",), group=OUTPUT, argv=False, help="also write the records here (one per cell)")
RESUME_CELLS = Flag(
    ("--resume",),
    switch=True,
    group=OUTPUT,
    argv=False,
    help="skip cells already in the database with the same identity",
)


@dataclass(kw_only=True)
class CommandOptions:
    """What every command that runs cells takes besides its own subject: intra-op
    threads, the results database, a JSON copy of the records, a per-cell timeout
    and the command line to record.  Keyword-only, so a request's own fields keep
    their positions."""

    threads: int | None = flag("--threads", default=None, type=int, help="intra-op threads")
    timeout: float | None = flag(
        "--timeout", default=None, type=float, help="seconds per cell (default none)"
    )
    db: str | None = field_of(DB, default=None)
    json_path: str | None = field_of(JSON_RECORDS, default=None)
    argv: list[str] | None = None
