"""DeepSpeech2 in Keras 3: its CTC loss (tf.nn.ctc_loss) is the numpy reference's and it
learns synthetic utterances (NHWC) through the harness session."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.tensorflow import Session
from dlbench.models import synthetic
from dlbench.models.deepspeech2.keras import ctc_loss
from dlbench.models.registry import get_model
from tests.test_deepspeech2_pytorch import MINI, ctc_case


def test_ctc_loss_is_the_mean_negative_log_likelihood():
    logits, labels, reference = ctc_case()
    assert float(ctc_loss(tf.constant(logits), labels)) == pytest.approx(reference, rel=1e-5)


def test_session_learns_synthetic_utterances():
    spec = get_model(MINI)
    cfg = TrainConfig(
        model=MINI,
        framework="tensorflow",
        batch_size=8,
        steps=12,
        warmup_steps=0,
        learning_rate=spec.default_lr,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = Session(spec, cfg, synthetic.batches(spec, 8, 4, seed=0, layout="NHWC"))
    losses = [session.step(i) for i in range(12)]
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3]), losses
    score = session.evaluate(synthetic.batches(spec, 8, 1, seed=9, layout="NHWC"))
    assert score["samples"] == 8 and 0 <= score["cer"]
