"""LSTM weights move between frameworks and keep computing the same function.

The same protocol as tests/test_weights_transfer.py (whose child script this
runs, one framework per process), for ``lstm-tiny``: embedding, two
bidirectional LSTM layers (PyTorch's gate order and two biases on one side,
Keras' transposed kernels and single bias on the other) and the classifier.
Token inputs come from ``models.synthetic``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.registry import get_model

CHILD = Path(__file__).with_name("transfer_child.py")
FRAMEWORKS = ("pytorch", "tensorflow", "mindspore")
MODEL = "lstm-tiny"
# fp32 rounding through 32 recurrent steps and two layers: measured ~1e-7 of the scale.
RTOL, ATOL = 1e-4, 1e-5


def _run_all(role: str, directory: Path) -> None:
    env = dict(os.environ, GLOG_v="3", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    procs = {fw: subprocess.Popen([sys.executable, str(CHILD), role, fw, str(directory), MODEL],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
             for fw in FRAMEWORKS}
    failed = []
    for fw, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            failed.append(f"{role} {fw} exited {proc.returncode}:\n{out[-3000:]}")
    assert not failed, "\n".join(failed)


@pytest.fixture(scope="module")
def transferred(tmp_path_factory):
    directory = tmp_path_factory.mktemp("lstm-weights")
    _run_all("source", directory)
    _run_all("target", directory)
    return directory


CASES = [pytest.param(s, t, id=f"{s}-to-{t}") for s in FRAMEWORKS for t in FRAMEWORKS if s != t]


@pytest.mark.parametrize("source,target", CASES)
def test_lstm_weights_reproduce_the_source_logits(transferred, source, target):
    ref = np.load(transferred / f"{MODEL}.{source}.out.npz")
    got = np.load(transferred / f"{MODEL}.{source}-{target}.out.npz")
    logits = ref["logits"]
    assert logits.shape == got["logits"].shape == (4, get_model(MODEL).num_classes)
    scale = float(np.abs(logits).max())
    bound = ATOL + RTOL * scale
    assert float(logits.std(axis=0).mean()) > 1e-3 * scale
    assert float(np.abs(got["before"] - logits).max()) > 100 * bound
    err = float(np.abs(got["logits"] - logits).max())
    assert err <= bound, f"{source} -> {target}: max |diff| {err:.3g} > {bound:.3g}"
    assert float(ref["roundtrip"]) == 0.0
    assert float(got["roundtrip"]) == 0.0


def test_canonical_lstm_names_are_pytorch_state_dict_keys(transferred):
    from models import weights

    names = {fw: list(weights.load(transferred / f"{MODEL}.{fw}.weights.npz")[0])
             for fw in FRAMEWORKS}
    assert set(names["tensorflow"]) == set(names["pytorch"]) == set(names["mindspore"])
    assert {"embedding.weight", "lstm.0.weight_ih_l0", "lstm.1.bias_hh_l0_reverse",
            "fc.weight"} <= set(names["pytorch"])
