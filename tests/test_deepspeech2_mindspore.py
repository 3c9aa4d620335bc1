"""DeepSpeech2 in MindSpore: its CTC loss (ops.ctc_loss, on CPU) is the numpy reference's,
its convolutions pad explicitly (the ONNX exporter misorders Conv2d's unequal pads) and it
learns synthetic utterances through the harness session in graph mode."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("GLOG_v", "3")
ms = pytest.importorskip("mindspore")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.mindspore import Session
from dlbench.models import synthetic
from dlbench.models.deepspeech2.mindspore import CTCLoss
from dlbench.models.registry import get_model
from tests.test_deepspeech2_pytorch import MINI, ctc_case


def test_ctc_loss_is_the_mean_negative_log_likelihood():
    logits, labels, reference = ctc_case()
    loss = CTCLoss()(ms.Tensor(logits), *(ms.Tensor(a) for a in labels))
    assert float(loss.asnumpy()) == pytest.approx(reference, rel=1e-5)


def test_convolutions_pad_explicitly():
    model = get_model(MINI).build("mindspore", seed=0)
    assert {model.conv1.pad_mode, model.conv2.pad_mode} == {"valid"}
    assert model.pad1.paddings == ((0, 0), (0, 0), (20, 20), (5, 5))


def test_session_learns_synthetic_utterances_in_graph_mode():
    spec = get_model(MINI)
    cfg = TrainConfig(
        model=MINI,
        framework="mindspore",
        batch_size=8,
        steps=12,
        warmup_steps=0,
        learning_rate=spec.default_lr,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = Session(spec, cfg, synthetic.batches(spec, 8, 4, seed=0))
    assert ms.get_context("mode") == ms.GRAPH_MODE
    frozen = {p.name: p.asnumpy().copy() for p in session.model.get_parameters() if ".bias_hh_" in p.name}
    losses = [session.step(i) for i in range(12)]
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3]), losses
    after = {p.name: p.asnumpy() for p in session.model.get_parameters()}
    assert frozen and all(not after[n].any() for n in frozen)
    score = session.evaluate(synthetic.batches(spec, 8, 1, seed=9))
    assert score["samples"] == 8 and 0 <= score["cer"]
