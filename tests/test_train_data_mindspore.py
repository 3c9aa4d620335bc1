"""Real data through the shared loop in mindspore: per-step reading, data time, --eval."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mindspore
import mindspore  # noqa: F401 - CI installs it: a missing one must fail, not skip

from dlbench.harness.training.mindspore import Session
from tests.utils.datasets import check_cifar_run_and_eval, check_eval_is_inference_mode


def test_cifar_run_reports_data_time_and_eval(tmp_path):
    check_cifar_run_and_eval("mindspore", tmp_path, intra_op_threads=2)


def test_evaluate_runs_in_inference_mode():
    check_eval_is_inference_mode(Session, "mindspore", intra_op_threads=2)
