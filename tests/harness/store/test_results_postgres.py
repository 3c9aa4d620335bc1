"""``--db postgresql://``: the results store on a REAL PostgreSQL server that this module
starts (tests/utils/pgserver.py: initdb in a temporary directory, 127.0.0.1, a free port,
password authentication) and stops at the end.  Never skipped: without initdb the
fixture fails and says to run ``make postgres``.

The backend-independent store tests of tests/harness/store/test_results.py run here again on the
server (its ``new_store`` replaced below); then what only a server has: the schema
spelled for PostgreSQL, many writers at once, the server going away mid-sweep, bad
URLs and credentials through the real CLI, and report, compare and resume over it.
"""

import itertools
import json
import os
import subprocess
import sys
import time

import psycopg
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.store.results import SCHEMA_VERSION, ResultStore

# Collected here too, with this module's new_store: the same assertions on PostgreSQL.
from tests.harness.store.test_results import (  # noqa: F401 - collected here, run on PostgreSQL
    MACHINE,
    test_a_peak_measured_on_a_busy_machine_is_used_only_until_a_quiet_one_exists,
    test_artifacts_round_trip_newest_first,
    test_finished_cell_keys_ignores_failures,
    test_noise_floor_is_matched_on_thread_count,
    test_only_if_absent_keeps_the_first_finished_record_of_a_cell,
    test_peak_is_matched_on_thread_count_and_the_best_one_counts,
    test_round_trip_keeps_columns_context_and_metrics,
)
from tests.utils import pgserver
from tests.utils.clitools import assert_usage_error

NAMES = itertools.count()


@pytest.fixture(scope="session")
def pg():
    server = pgserver.Server()
    yield server
    server.close()


@pytest.fixture
def new_database(pg):
    """A fresh empty database on the server per call; its URL."""
    return lambda: pg.create_database(f"t{os.getpid()}_{next(NAMES)}")


@pytest.fixture
def new_store(new_database, workdir):
    """In ``workdir``: the spool (results/pending-*.sqlite) lands in the test's directory."""
    return lambda: ResultStore(new_database())


@pytest.fixture
def url(new_database, workdir):
    return new_database()


def _record(key, run_id="r", kind="bench", status="ok", **fields):
    return {
        "run_id": run_id,
        "kind": kind,
        "cell_key": key,
        "status": status,
        "started_at": "2026-01-01T00:00:00+00:00",
        "context": {"k": key},
        "metrics": {"throughput_sps": 1.0},
        **fields,
    }


def _sql(url, query, params=()):
    with psycopg.connect(url) as con:
        cur = con.execute(query, params)
        return cur.fetchall() if cur.description else None


def test_same_tables_and_columns_as_sqlite_and_a_schema_version(url, workdir):
    import sqlite3

    ResultStore(url).check_writable()
    lite = ResultStore(workdir / "r.sqlite")
    lite.check_writable()
    con = sqlite3.connect(lite.path)
    for table in ("machines", "records", "artifacts"):
        want = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        have = [
            r[0]
            for r in _sql(
                url,
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = %s ORDER BY ordinal_position",
                (table,),
            )
        ]
        assert have == want, table
    types = dict(
        _sql(
            url, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'records'"
        )
    )
    assert types["id"] == "bigint" and types["throughput_sps"] == "double precision"
    assert types["batch_size"] == "bigint" and types["context"] == "text"
    assert _sql(url, "SELECT version FROM dlbench_schema") == [(SCHEMA_VERSION,)]


def test_a_newer_schema_is_refused_in_one_line(pg, url, cli):
    _sql(url, "CREATE TABLE dlbench_schema (version INTEGER NOT NULL)")
    _sql(url, "INSERT INTO dlbench_schema VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(UserError, match=f"schema {SCHEMA_VERSION + 1}.*upgrade dlbench"):
        ResultStore(url).check_writable()
    out = cli("compare", "A", "B", "--db", url)
    assert_usage_error(out, "upgrade dlbench")
    assert pg.password not in out.stdout + out.stderr


def test_another_applications_schema_is_refused_untouched(pg, url, cli):
    """As a foreign SQLite file is: dlbench's tables would land beside someone else's."""
    _sql(url, "CREATE TABLE users (name TEXT)")
    with pytest.raises(UserError, match=r"holds another application's tables \(users\)"):
        ResultStore(url).check_writable()
    out = cli("compare", "A", "B", "--db", url)
    assert_usage_error(out, "a database or schema of its own")
    assert pg.password not in out.stdout + out.stderr
    tables = _sql(url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    assert tables == [("users",)]  # nothing created: not even dlbench_schema


def test_a_role_that_may_only_insert_and_select_writes_and_reports(pg, url, cli):
    """Tables made once by their owner; then a role without CREATE rights stores records
    (no migration lock, no DDL) and reports them."""
    ResultStore(url).check_writable()
    _sql(url, "CREATE ROLE writer LOGIN PASSWORD 'writer-pw'")
    _sql(url, "GRANT SELECT, INSERT ON machines, records, artifacts TO writer")
    _sql(url, "GRANT SELECT ON dlbench_schema TO writer")
    writer = url.replace(f"dlbench:{pg.password}@", "writer:writer-pw@")
    store = ResultStore(writer)
    store.check_writable()
    rid = store.add(
        _record("k", run_id="W", model="mlp", backend="onnxruntime", batch_size=1, throughput_sps=5.0),
        MACHINE,
    )
    assert store.finished_cell_keys(["k"]) == {"k"} and rid > 0
    out = cli("report", "--db", writer, "--format", "csv")
    assert out.returncode == 0 and "W" in out.stdout, out.stderr
    _sql(url, "REVOKE ALL ON machines, records, artifacts, dlbench_schema FROM writer")
    _sql(url, "DROP ROLE writer")


CHILD = """
import json, sys, time
from dlbench.harness.store.results import ResultStore
url, tag, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
store = ResultStore(url)
while time.time() < go:
    time.sleep(0.005)
ids = [store.add({"run_id": f"w{tag}", "kind": "bench", "cell_key": f"{tag}-{i}",
                  "status": "ok", "started_at": "t", "metrics": {"i": i}},
                 {"machine_id": f"m{tag % 2}"}) for i in range(n)]
print(json.dumps(ids))
"""


def test_many_writers_at_once_all_land_with_unique_ids(url):
    """Six processes, two machines, one fresh database (so they also race to create the
    tables): every record lands, under its own id, and each machine is stored once."""
    writers, n = 6, 15
    go = time.time() + 3  # every child imported and waiting: one start
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, url, str(t), str(n), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for t in range(writers)
    ]
    returned = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        returned += json.loads(out)
    stored = ResultStore(url).records()
    assert len(stored) == writers * n == len(set(returned))
    assert sorted(r["id"] for r in stored) == sorted(returned)
    assert {r["cell_key"] for r in stored} == {f"{t}-{i}" for t in range(writers) for i in range(n)}
    assert sorted(_sql(url, "SELECT machine_id FROM machines")) == [("m0",), ("m1",)]


def test_a_server_gone_mid_sweep_keeps_the_record_in_the_spool(pg, url, workdir, capsys, cli):
    store = ResultStore(url)
    store.check_writable()  # the sweep starts: the server is there
    first = store.add(_record("a"), MACHINE)
    assert first > 0
    pg.stop()
    try:
        rec = _record("b", context={"db": url})
        rid = store.add(rec, MACHINE)
        warning = capsys.readouterr().err.strip().splitlines()
        spool = rec["spooled_to"]
        assert rid < 0 and spool.startswith(os.path.join("results", "pending-"))
        assert len(warning) == 1 and "unreachable" in warning[0] and spool in warning[0]
        assert pg.password not in warning[0] and (workdir / spool).exists()
        art = store.add_artifact(
            {
                "path": "/m.onnx",
                "sha256": "s1",
                "format": "onnx",
                "verified": True,
                "verdict": {"ok": True},
                "created_at": "t",
                "record_id": rid,
            }
        )
        assert art < 0
        # Mid-sweep lookups (a peak, an artifact's verdict) answer from the spool.
        assert store.finished_cell_keys(["a", "b"]) == {"b"}
        assert store.artifact("s1")["verified"] is True
        assert "reading only what" in capsys.readouterr().err
        # A command that starts now has measured nothing yet: it is told, in one line.
        with pytest.raises(UserError, match="cannot reach the results database"):
            ResultStore(url).check_writable()
        out = cli("compare", "A", "B", "--db", url, process=True)  # a new process: no memo
        assert_usage_error(out, "cannot reach the results database", "***")
        assert pg.password not in out.stdout + out.stderr
    finally:
        pg.start()
    third = ResultStore(url).add(_record("c"), MACHINE)  # the next add flushes first
    assert "moved 1 record(s) kept in" in capsys.readouterr().err
    stored = ResultStore(url).records()
    assert [r["cell_key"] for r in stored] == ["a", "b", "c"] and stored[2]["id"] == third
    assert pg.password not in json.dumps(stored) and "***" in stored[1]["context"]["db"]
    moved = ResultStore(url).artifact("s1")
    assert moved["record_id"] == stored[1]["id"] and moved["verified"] is True
    assert ResultStore(workdir / spool).records() == []  # the spool is empty


def test_the_next_command_flushes_the_spool_and_reports_it(pg, url, workdir, cli):
    """Spooled by one process while the server was down; the next ``dlbench`` command (a
    report, here) stores it before reading."""
    store = ResultStore(url)
    store.check_writable()
    pg.stop()
    try:
        assert (
            store.add(
                _record(
                    "k",
                    run_id="R1",
                    model="mlp",
                    backend="onnxruntime",
                    device="cpu",
                    precision="fp32",
                    batch_size=1,
                    scenario="offline",
                    throughput_sps=123.0,
                ),
                MACHINE,
            )
            < 0
        )
    finally:
        pg.start()
    out = cli("report", "--db", url, "--format", "csv")
    assert out.returncode == 0, out.stderr
    assert "moved 1 record(s)" in out.stderr and "R1" in out.stdout
    assert pg.password not in out.stdout + out.stderr
    assert [r["run_id"] for r in ResultStore(url).records()] == ["R1"]


@pytest.mark.parametrize("case", ["password", "database", "port", "query", "unreachable", "environment"])
def test_bad_urls_and_credentials_are_one_line_exit_2_without_the_password(pg, cli, workdir, case):
    wrong = "WrongSecret-4711"
    url, env, needle = pg.url(), {}, None
    if case == "password":
        url, needle = pg.url(password=wrong), "password authentication failed"
    elif case == "database":
        url, needle = pg.url("nosuchdb"), 'database "nosuchdb" does not exist'
    elif case == "port":
        url, needle = url.replace(f":{pg.port}/", ":notaport/"), "invalid integer value"
    elif case == "query":
        url, needle = url + "?bogus=1", "not a valid PostgreSQL URL"
    elif case == "unreachable":
        url, needle = url.replace(f":{pg.port}/", f":{pgserver.free_port()}/"), "cannot reach"
    else:  # $DLBENCH_DB, the other scheme, a write command
        env = {"DLBENCH_DB": pg.url(password=wrong, scheme="postgres")}
        needle = "password authentication failed"
    secret = wrong if case in ("password", "environment") else pg.password
    args = ["--db", url] if not env else []
    for command in (
        ["report", *args],
        ["compare", "A", "B", *args],
        ["micro", "gemm", "--shape", "8", "--engine", "numpy", *args],
    ):
        out = cli(*command, env=env)
        assert_usage_error(out, needle, "***")
        assert secret not in out.stdout + out.stderr, command
    assert not (workdir / "results").exists(), "nothing spooled, nothing measured"


def test_a_url_without_password_uses_pgpass_as_the_readme_says(pg, url, workdir, cli):
    pgpass = workdir / "pgpass"
    pgpass.write_text(f"127.0.0.1:{pg.port}:*:{pgserver.USER}:{pg.password}\n")
    pgpass.chmod(0o600)
    bare = url.replace(f":{pg.password}@", "@")
    ResultStore(url).add(
        _record("k", run_id="P", model="mlp", backend="onnxruntime", batch_size=1, throughput_sps=5.0),
        MACHINE,
    )
    out = cli("report", "--db", bare, "--format", "csv", env={"PGPASSFILE": str(pgpass)})
    assert out.returncode == 0 and "P" in out.stdout, out.stderr


def test_report_and_compare_read_from_postgres(url, cli):
    from tests.harness.compare.test_compare import bench_record, store_all

    store_all(
        url,
        [
            bench_record("A", 2.0, batch=8, seed=1),
            bench_record("A", 0.5, batch=1, seed=2),
            bench_record("B", 2.2, batch=8, seed=4),
        ],
    )
    out = cli("compare", "A", "B", "--db", url)
    assert out.returncode == 0, out.stderr
    assert "slower" in next(ln for ln in out.stdout.splitlines() if "batch 8" in ln)
    assert "only in the baseline" in out.stdout
    report = cli("report", "--db", url, "--run", "B", "--format", "json")
    assert report.returncode == 0, report.stderr
    [row] = json.loads(report.stdout)
    assert row["run_id"] == "B" and row["batch_size"] == 8
    empty = cli("report", "--db", url.rsplit("/", 1)[0] + "/postgres")
    assert_usage_error(empty, "has no records")


def test_a_sweep_resumes_from_postgres_and_records_no_password(pg, url, cli):
    """A real ``dlbench micro`` cell stored in PostgreSQL; ``--resume`` finds it there and
    skips it.  The password is in no output, no command line and no context."""
    args = (
        "micro",
        "gemm",
        "--shape",
        "16",
        "--engine",
        "numpy",
        "--min-duration",
        "0.02",
        "--min-iterations",
        "3",
        "--warmup",
        "1",
        "--threads",
        "1",
        "--db",
        url,
    )
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    [rec] = ResultStore(url).records()
    assert rec["kind"] == "micro" and rec["status"] in ("ok", "unstable")
    again = cli(*args[:-2], "--resume", env={"DLBENCH_DB": url})  # the URL from $DLBENCH_DB
    assert again.returncode == 0, again.stderr
    assert len(ResultStore(url).records()) == 1, "resumed: the stored cell was skipped"
    assert "1 of 1 cells already in postgresql://dlbench:***@127.0.0.1" in again.stderr
    assert "--db postgresql://dlbench:***@127.0.0.1" in rec["command_line"]
    # A password typed into --db is in the shell's history: said once, after the work;
    # the same URL from $DLBENCH_DB (not on the command line) draws no such note.
    assert "the password is in the URL" in first.stderr and "~/.pgpass" in first.stderr
    assert "the password is in the URL" not in again.stderr
    for text in (first.stdout, first.stderr, again.stdout, again.stderr, json.dumps(rec)):
        assert pg.password not in text


def test_a_password_is_masked_in_records_configuration_and_printed_steps():
    from dlbench.harness.cli.config import resolved
    from dlbench.harness.store.context import command_line
    from dlbench.harness.store.schema import record_row

    url = "postgresql://me:p%40ss@db.example:5432/runs?sslmode=require&password=other"
    line = command_line(["bench", "m.onnx", "--db", url])
    assert "p%40ss" not in line and "other" not in line
    assert "postgresql://me:***@db.example:5432/runs?sslmode=require&password=***" in line
    row = record_row({"command_line": f"dlbench run --db {url}", "context": {"db": url}}, {"machine_id": "m"})
    assert "p%40ss" not in json.dumps(row) and "other" not in json.dumps(row)
    from dlbench.harness.cli import build_parser
    from dlbench.harness.cli.config import parse_args
    from dlbench.harness.pipeline.plan import shell_line

    assert "p%40ss" not in shell_line(["dlbench", "report", "--db", url])  # --print-steps

    args = parse_args(build_parser(), ["bench", "m.onnx", "-b", "onnxruntime", "--db", url])
    assert "p%40ss" not in json.dumps(resolved(args)) and "me:***@" in resolved(args)["db"]
