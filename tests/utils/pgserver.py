"""A real, private PostgreSQL server for the tests: initdb in a temporary directory,
listening on 127.0.0.1 on a free port, password authentication (scram-sha-256), no
fsync.  ``initdb`` refuses to run as root, so under root the server runs as the
``postgres`` account Debian's package creates (``nobody`` without it)."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "dlbench"


def find_bin(name: str) -> str | None:
    """``name`` on PATH, else the newest Debian ``/usr/lib/postgresql/*/bin`` copy."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return versions[-1] if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        initdb = find_bin("initdb")
        if initdb is None:
            raise RuntimeError(
                "PostgreSQL's initdb is not installed (neither on PATH nor in "
                "/usr/lib/postgresql/*/bin): `make postgres` installs it"
            )
        self.bin = Path(initdb).parent
        self.password = "pw-" + secrets.token_hex(8)
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="dlbench-pg-"))
        self.data = self.root / "data"
        self._as = []
        if os.geteuid() == 0:
            account = next((a for a in ("postgres", "nobody") if _exists(a)), None)
            self._as = ["runuser", "-u", account, "--"]
            os.chown(self.root, pwd.getpwnam(account).pw_uid, pwd.getpwnam(account).pw_gid)
        (self.root / "pw").write_text(self.password + "\n")
        if self._as:
            shutil.chown(self.root / "pw", user=self._as[2])
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            "--pwfile",
            str(self.root / "pw"),
            "--auth",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale",
            "C",
        )
        self.start()

    def url(self, dbname: str = "postgres", password: str | None = None, scheme: str = "postgresql") -> str:
        pw = self.password if password is None else password
        return f"{scheme}://{USER}:{pw}@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c fsync=off "
            f"-c unix_socket_directories={self.root} -c max_connections=100"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        out = subprocess.run(
            [*self._as, str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.root,
        )
        if out.returncode != 0:
            log = self.root / "log"
            raise RuntimeError(
                f"{tool} failed ({out.returncode}): {out.stderr[-2000:]}"
                + (log.read_text()[-2000:] if log.exists() else "")
            )


def _exists(account: str) -> bool:
    try:
        pwd.getpwnam(account)
        return True
    except KeyError:
        return False
