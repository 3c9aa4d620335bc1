"""Real data for training: ``dlbench train --data/--eval`` end to end through the CLI
(frameworks only in the CLI's subprocesses: core tests), and each framework's session
through the shared loop: per-step reading, data time, --eval.

Every group collects this module, so a framework is imported only inside its tests; an
absent framework fails them there (CI installs all three), it never skips them.
"""

from __future__ import annotations

import importlib
import json
import sqlite3

import pytest

from tests.utils.clitools import assert_usage_error
from tests.utils.datasets import (
    check_cifar_run_and_eval,
    check_eval_is_inference_mode,
    write_aclimdb,
    write_cifar,
)
from tests.utils.frameworks import frameworks


def test_cifar_directory_trains_with_data_time_and_eval(cli, workdir):
    write_cifar(workdir / "cifar", per_file=12, files=2, test=6)
    out = cli(
        "train",
        "resnet50-mini",
        "-f",
        "pytorch",
        "--data",
        "cifar",
        "--eval",
        "--batch-size",
        "4",
        "--steps",
        "3",
        "--warmup-steps",
        "1",
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "t.json").read_text())
    m, ctx = rec["metrics"], rec["context"]
    assert ctx["config"]["data"] == str((workdir / "cifar").resolve())
    assert ctx["data"]["reader"] == "cifar10" and ctx["data"]["splits"] == {"train": 24, "test": 6}
    assert len(m["data_time_s"]) == 3 and m["data_time"]["mean"] > 0
    assert m["throughput_with_data_sps"] < m["throughput_sps"] == rec["throughput_sps"]
    assert m["eval"]["samples"] == 6 and m["eval"]["split"] == "test"
    assert "Eval loss / acc" in out.stdout and "Data time" in out.stdout
    row = (
        sqlite3.connect(workdir / "results.sqlite")
        .execute(
            "SELECT json_extract(context, '$.data.reader'), json_extract(metrics, '$.eval.samples') "
            "FROM records"
        )
        .fetchone()
    )
    assert row == ("cifar10", 6)


def test_digits_eval_learns_well_above_chance(cli, workdir):
    out = cli(
        "train",
        "resnet50-mini",
        "-f",
        "pytorch",
        "--data",
        "digits",
        "--eval",
        "--batch-size",
        "32",
        "--steps",
        "40",
        "--warmup-steps",
        "1",
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "t.json").read_text())
    ev = rec["metrics"]["eval"]
    assert ev["samples"] == 360 and ev["split"] == "test"
    assert ev["accuracy"] > 0.3, ev  # chance: 0.1 (ten balanced classes)
    assert rec["context"]["data"]["splits"] == {"train": 1437, "test": 360}


def test_bad_data_is_one_line_before_any_run(cli, workdir):
    write_cifar(workdir / "notest", per_file=12, files=1, test=0)
    write_aclimdb(workdir / "imdb")
    (workdir / "empty").mkdir()
    base = ("train", "resnet50-mini", "-f", "pytorch", "--batch-size", "4")
    assert_usage_error(cli(*base, "--data", "missing"), "--data missing", "no such file")
    assert_usage_error(cli(*base, "--data", "empty"), "format not recognized")
    assert_usage_error(cli(*base, "--data", "notest", "--eval"), "no held-out split", "test_batch.bin")
    assert_usage_error(cli(*base, "--data", "imdb"), "token data, but resnet50-mini")
    assert_usage_error(cli(*base, "--data", "notest", "--batch-size", "64"), "fewer than one batch of 64")
    assert_usage_error(
        cli(*base, "--data", "digits", "--eval", "--eval-samples", "0"), "--eval-samples must be at least 1"
    )
    assert not (workdir / "runs").exists()


def _session_class(framework: str):
    return importlib.import_module(f"dlbench.harness.training.{framework}").Session


def _threads(framework: str) -> dict:
    if framework != "tensorflow":
        return {"intra_op_threads": 2}
    # TensorFlow fixes its pools once per process: ask for what is in force.
    import tensorflow as tf

    t = tf.config.threading
    return {
        "intra_op_threads": t.get_intra_op_parallelism_threads(),
        "inter_op_threads": t.get_inter_op_parallelism_threads(),
    }


@pytest.mark.parametrize("framework", frameworks())
def test_cifar_run_reports_data_time_and_eval(framework, tmp_path):
    _session_class(framework)  # imports the framework: a missing one fails here
    r = check_cifar_run_and_eval(framework, tmp_path, **_threads(framework))
    if framework == "tensorflow":
        assert r["layout"] == "NHWC"


@pytest.mark.parametrize("framework", frameworks())
def test_evaluate_runs_in_inference_mode(framework):
    check_eval_is_inference_mode(_session_class(framework), framework, **_threads(framework))
