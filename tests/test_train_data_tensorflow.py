"""Real data through the shared loop in tensorflow: per-step reading, data time, --eval."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tensorflow
import tensorflow as tf

from dlbench.harness.training.tensorflow import Session
from tests.utils.datasets import check_cifar_run_and_eval, check_eval_is_inference_mode


def _threads() -> dict:
    # TensorFlow fixes its pools once per process: ask for what is in force.
    t = tf.config.threading
    return {
        "intra_op_threads": t.get_intra_op_parallelism_threads(),
        "inter_op_threads": t.get_inter_op_parallelism_threads(),
    }


def test_cifar_run_reports_data_time_and_eval(tmp_path):
    r = check_cifar_run_and_eval("tensorflow", tmp_path, **_threads())
    assert r["layout"] == "NHWC"


def test_evaluate_runs_in_inference_mode():
    check_eval_is_inference_mode(Session, "tensorflow", **_threads())
