import json
import sqlite3

import pytest

from dlbench.models.errors import UserError
from dlbench.harness.results import COLUMNS, SCHEMA_VERSION, ResultStore

MACHINE = {"machine_id": "m1", "cpu": {"model": "x"}}


def test_round_trip_keeps_columns_context_and_metrics(tmp_path):
    store = ResultStore(tmp_path / "sub" / "r.sqlite")
    rid = store.add({"run_id": "r", "kind": "train", "cell_key": "k", "status": "ok",
                     "started_at": "t", "model": "m", "batch_size": 4, "throughput_sps": 12.5,
                     "context": {"a": 1}, "metrics": {"samples": [1, 2]}}, MACHINE)
    [rec] = store.records()
    assert rec["id"] == rid and rec["throughput_sps"] == 12.5 and rec["batch_size"] == 4
    assert rec["context"] == {"a": 1} and rec["metrics"] == {"samples": [1, 2]}
    assert rec["machine_id"] == "m1"
    assert store.machine("m1") == MACHINE
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    cols = {r[1] for r in con.execute("PRAGMA table_info(records)")}
    assert set(COLUMNS) <= cols


def test_not_a_database_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("hello")
    with pytest.raises(UserError, match="not a dlbench results database"):
        ResultStore(bad).check_writable()


def test_directory_is_refused(tmp_path):
    with pytest.raises(UserError, match="directory"):
        ResultStore(tmp_path).check_writable()


def test_schema_is_documented():
    from pathlib import Path
    doc = (Path(__file__).parents[1] / "docs" / "results-schema.md").read_text()
    for col in COLUMNS:
        assert f"`{col}`" in doc, f"column {col} is not documented"


def test_finished_cell_keys_ignores_failures(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    assert store.finished_cell_keys(["a"]) == set()
    for key, status in (("a", "ok"), ("b", "failed"), ("c", "unstable")):
        store.add({"run_id": "r", "kind": "bench", "cell_key": key, "status": status,
                   "started_at": "t"}, MACHINE)
    assert store.finished_cell_keys(["a", "b", "c", "d"]) == {"a", "c"}
