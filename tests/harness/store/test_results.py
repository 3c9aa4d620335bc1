import sqlite3

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.store.results import COLUMNS, SCHEMA_VERSION, ResultStore
from tests.utils import ROOT

MACHINE = {"machine_id": "m1", "cpu": {"model": "x"}}


@pytest.fixture
def new_store(tmp_path):
    """A fresh, empty store per call.  The tests that take it hold for every backend:
    tests/harness/store/test_results_postgres.py runs them again on a real PostgreSQL server."""
    made = iter(range(1000))
    return lambda: ResultStore(tmp_path / f"s{next(made)}" / "r.sqlite")


def test_round_trip_keeps_columns_context_and_metrics(new_store):
    store = new_store()
    rid = store.add(
        {
            "run_id": "r",
            "kind": "train",
            "cell_key": "k",
            "status": "ok",
            "started_at": "t",
            "model": "m",
            "batch_size": 4,
            "throughput_sps": 12.5,
            "context": {"a": 1},
            "metrics": {"samples": [1, 2]},
        },
        MACHINE,
    )
    [rec] = store.records()
    assert rec["id"] == rid and rec["throughput_sps"] == 12.5 and rec["batch_size"] == 4
    assert rec["context"] == {"a": 1} and rec["metrics"] == {"samples": [1, 2]}
    assert rec["machine_id"] == "m1"
    assert store.machine("m1") == MACHINE and store.machine("m2") is None
    assert store.exists()


def test_artifacts_round_trip_newest_first(new_store):
    store = new_store()
    assert store.artifact("abc") is None
    rid = store.add(
        {"run_id": "r", "kind": "convert", "cell_key": "k", "status": "ok", "started_at": "t"}, MACHINE
    )
    for verified in (False, True):
        store.add_artifact(
            {
                "path": "/m.onnx",
                "sha256": "abc",
                "format": "onnx",
                "verified": verified,
                "verdict": {"ok": verified},
                "created_at": "t",
                "record_id": rid,
                "size_bytes": 2**40,
            }
        )
    newest = store.artifact("abc")
    assert newest["verified"] is True and newest["verdict"] == {"ok": True}
    assert newest["record_id"] == rid and newest["size_bytes"] == 2**40
    assert [a["verified"] for a in store.artifacts("sha256 = ?", ["abc"])] == [False, True]


def test_sqlite_schema_version_and_columns(tmp_path):
    store = ResultStore(tmp_path / "sub" / "r.sqlite")
    store.check_writable()
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    cols = {r[1] for r in con.execute("PRAGMA table_info(records)")}
    assert set(COLUMNS) <= cols
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(UserError, match="upgrade dlbench"):
        store.check_writable()


def test_not_a_database_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("hello")
    with pytest.raises(UserError, match="not a dlbench results database"):
        ResultStore(bad).check_writable()


def test_directory_is_refused(tmp_path):
    with pytest.raises(UserError, match="directory"):
        ResultStore(tmp_path).check_writable()


def test_schema_is_documented():

    doc = (ROOT / "docs" / "results-schema.md").read_text()
    for col in COLUMNS:
        assert f"`{col}`" in doc, f"column {col} is not documented"


def test_finished_cell_keys_ignores_failures(new_store):
    store = new_store()
    assert store.finished_cell_keys(["a"]) == set()
    for key, status in (("a", "ok"), ("b", "failed"), ("c", "unstable")):
        store.add(
            {"run_id": "r", "kind": "bench", "cell_key": key, "status": status, "started_at": "t"}, MACHINE
        )
    store.add(
        {"run_id": "r2", "kind": "bench", "cell_key": "e", "status": "failed", "started_at": "t"}, MACHINE
    )
    assert store.finished_cell_keys(["a", "b", "c", "d"]) == {"a", "c"}
    # Within one run (a resumed `dlbench run`) a stored failure counts as measured.
    assert store.finished_cell_keys(["a", "e"], run_id="r2") == {"e"}
    many = [f"x{i}" for i in range(1200)] + ["c"]  # more than one chunk of keys
    assert store.finished_cell_keys(many) == {"c"}


def test_only_if_absent_keeps_the_first_finished_record_of_a_cell(new_store):
    """A resumed sweep's record is added only if no finished record of its cell is there
    (another writer resuming the same sweep got there first); a failure never blocks it."""
    store = new_store()

    def rec(key, status, run="r"):
        return {"run_id": run, "kind": "bench", "cell_key": key, "status": status, "started_at": "t"}

    assert store.add(rec("a", "failed"), MACHINE, only_if_absent=True) > 0  # failures: history
    first = store.add(rec("a", "ok"), MACHINE, only_if_absent=True)
    assert first > 0
    assert store.add(rec("a", "ok", run="r2"), MACHINE, only_if_absent=True) == 0
    assert store.add(rec("a", "failed", run="r3"), MACHINE, only_if_absent=True) > 0
    assert store.add(rec("a", "ok", run="r4"), MACHINE) > 0  # a plain sweep always stores
    rows = store.records("cell_key = 'a' AND status = 'ok'")
    assert [r["run_id"] for r in rows] == ["r", "r4"] and rows[0]["id"] == first


def _peak(store, threads, gflops, machine_id="m1", started="2026-01-01T00:00:00", contended=None):
    """A peak record as ``dlbench env --peak`` stores it, with a GFLOP/s of our choosing."""
    from dlbench.harness.machine.fingerprint import fingerprint
    from dlbench.harness.store import records

    fp = dict(fingerprint(), machine_id=machine_id)
    rec = records.new_record(
        "peak",
        run_id="p",
        identity={"threads": threads, "at": started},
        started=started,
        argv=None,
        device="cpu",
        fp=fp,
        status="ok",
        precision="fp32",
        intra_op_threads=threads,
        metrics={"gflops": gflops, "contended_share": contended},
    )
    return store.add(rec, fp)


def test_a_peak_measured_on_a_busy_machine_is_used_only_until_a_quiet_one_exists(new_store):
    """A peak others' processes pushed down reads low, and every cell's share then reads
    high ("INVALID: 162 % of peak"): it is flagged, and a quiet peak wins over it, even a
    lower one."""
    from dlbench.harness.bench.peak_share import lookup, share_of_peak

    store = new_store()
    _peak(store, 2, 80.0, contended=0.45)
    peak = lookup(store, "m1", "cpu", "fp32", 2)
    assert peak["gflops"] == 80.0 and peak["busy"]
    assert (
        "measured while other processes held the CPUs"
        in share_of_peak(store, "m1", "cpu", "fp32", 2, 40.0)["peak_note"]
    )
    _peak(store, 2, 75.0, contended=0.02, started="2026-01-02T00:00:00")
    peak = lookup(store, "m1", "cpu", "fp32", 2)
    assert peak["gflops"] == 75.0 and not peak["busy"]  # the quiet one, though lower
    assert "peak_note" not in share_of_peak(store, "m1", "cpu", "fp32", 2, 40.0)


def test_peak_is_matched_on_thread_count_and_the_best_one_counts(new_store):
    """The class of bug behind "176.6 % of peak": a 1-thread cell divided by a 2-thread peak
    that other processes had pushed down.  Each thread count has its own peak, and a later,
    lower measurement (a busy machine) does not replace a better one."""
    from dlbench.harness.bench.peak_share import lookup, missing_thread_counts, share_of_peak

    store = new_store()
    assert share_of_peak(store, "m1", "cpu", "fp32", 1, 50.0) == {}  # no peak: nothing
    one = _peak(store, 1, 100.0)
    _peak(store, 1, 40.0, started="2026-02-01T00:00:00")  # newer, worse
    two = _peak(store, 2, 30.0)  # a busy machine's
    _peak(store, 2, 10.0, machine_id="m2")
    assert lookup(store, "m1", "cpu", "fp32", 1)["record_id"] == one
    assert lookup(store, "m1", "cpu", "fp32", 2)["gflops"] == 30.0
    assert lookup(store, "m1", "cpu", "int8", 1) is None
    at_one = share_of_peak(store, "m1", "cpu", "fp32", 1, 50.0)
    assert at_one["percent_of_peak"] == pytest.approx(50.0) and at_one["peak_threads"] == 1
    assert not at_one["above_peak"] and "peak_note" not in at_one
    at_two = share_of_peak(store, "m1", "cpu", "fp32", 2, 50.0)
    assert at_two["peak_record_id"] == two and at_two["above_peak"]
    assert at_two["percent_of_peak"] == pytest.approx(166.67, rel=1e-3)
    assert "above it means the FLOP count or the peak is wrong" in at_two["peak_note"]
    at_four = share_of_peak(store, "m1", "cpu", "fp32", 4, 50.0)
    assert "percent_of_peak" not in at_four
    assert "--peak-threads 4" in at_four["peak_note"]
    assert missing_thread_counts(store, "m1", {1, 2, 4})[0] == [4]
    assert missing_thread_counts(store, "m3", {1})[0] == []  # never opted in


def test_a_share_just_above_the_peak_is_the_peak_within_noise(new_store):
    """The same GEMM timed again reads a little above the peak measured before it (100.7 %
    on an H100): that is noise, not a wrong count.  Beyond the noise band it is no result,
    in the record and in every table that prints the share."""
    from dlbench.harness.bench.peak_share import PEAK_NOISE_PCT, beyond_peak, share_of_peak

    store = new_store()
    _peak(store, 1, 100.0)
    near = share_of_peak(store, "m1", "cpu", "fp32", 1, 100 + PEAK_NOISE_PCT / 2)
    assert not near["above_peak"] and "peak_note" not in near
    far = share_of_peak(store, "m1", "cpu", "fp32", 1, 100 + 2 * PEAK_NOISE_PCT)
    assert far["above_peak"] and "not a result" in far["peak_note"]
    assert [beyond_peak(p) for p in (None, 99.0, 100 + PEAK_NOISE_PCT, 100.01 + PEAK_NOISE_PCT)] == [
        False,
        False,
        False,
        True,
    ]


def test_noise_floor_is_the_newest_ok_record_of_the_machine(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    assert ResultStore(tmp_path / "none.sqlite").noise_floor("m1") is None
    assert not (tmp_path / "none.sqlite").exists()  # looking creates nothing
    for status, value in (("ok", 0.03), ("ok", 0.017), ("failed", None)):
        store.add(
            {
                "run_id": "r",
                "kind": "noise_floor",
                "cell_key": "k",
                "status": status,
                "started_at": "t",
                "metrics": {"noise_floor": value},
            },
            MACHINE,
        )
    assert store.noise_floor("m1")["metrics"]["noise_floor"] == 0.017
    assert store.noise_floor("m2") is None


def test_noise_floor_is_matched_on_thread_count(new_store):
    """One thread's floor says nothing of two threads' (7 % and 35 % on the 2-core machine)."""
    from dlbench.harness.compare.noise import floor_for

    store = new_store()
    for threads, value in ((1, 0.07), (2, 0.35)):
        store.add(
            {
                "run_id": "r",
                "kind": "noise_floor",
                "cell_key": "k",
                "status": "ok",
                "started_at": "t",
                "intra_op_threads": threads,
                "metrics": {"noise_floor": value},
            },
            MACHINE,
        )
    assert store.noise_floor("m1", 1)["metrics"]["noise_floor"] == 0.07
    assert store.noise_floor("m1", 2)["metrics"]["noise_floor"] == 0.35
    assert store.noise_floor("m1", 4) is None
    one = [{"machine_id": "m1", "intra_op_threads": 1}]
    assert floor_for(store, one).value == 0.07
    assert floor_for(store, one + [{"machine_id": "m1", "intra_op_threads": 2}]).value == 0.35
    unmeasured = floor_for(store, [{"machine_id": "m1", "intra_op_threads": 4}])
    assert unmeasured.source == "default" and "--threads N" in unmeasured.describe()


def test_another_applications_database_is_refused_untouched(tmp_path):
    import hashlib
    import sqlite3

    from dlbench.core.errors import UserError

    path = tmp_path / "app.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (name TEXT)")
    con.execute("PRAGMA user_version = 7")
    con.commit()
    con.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(UserError, match=r"holds another application's tables \(users\)"):
        ResultStore(path).add({"run_id": "r", "kind": "bench", "status": "ok", "started_at": "t"}, MACHINE)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
