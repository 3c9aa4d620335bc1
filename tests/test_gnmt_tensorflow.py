"""GNMT in Keras 3: the walk's counts (every call of a shared layer counted), PyTorch's
layer names, the greedy decoder is the teacher-forced one fed its own arg-max, and the
harness session trains with the padding-free loss, its checkpoint loading into the
greedy network."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.tensorflow import Session
from dlbench.models import synthetic
from dlbench.models.counting.tensorflow import forward_macs, trainable_parameters
from dlbench.models.gnmt import BOS_ID, example_inputs
from dlbench.models.gnmt.keras import seq2seq_loss
from dlbench.models.native import tensorflow as native
from dlbench.models.registry import get_model

MINI, GREEDY = get_model("gnmt-mini"), get_model("gnmt-mini-greedy")
pytestmark = pytest.mark.filterwarnings("ignore:TensorFlow.s runtime was already initialized")


@pytest.mark.parametrize("name", ["gnmt-mini", "gnmt-mini-greedy"])
def test_counts_match_the_analytic_walk(name):
    spec = get_model(name)
    model = spec.build("tensorflow")
    assert trainable_parameters(model) == spec.parameter_count == 97_536
    assert forward_macs(model, spec) == spec.macs_per_sample == 1_139_712
    names = {layer.name for layer in model.layers}
    assert {
        "embedding",
        "encoder.0",
        "encoder.3",
        "decoder.0",
        "decoder.3",
        "attention.query",
        "attention.key",
        "attention.score",
        "classifier",
    } <= names


def test_greedy_is_the_teacher_forced_decoder_fed_its_own_arg_max():
    (src,) = example_inputs(GREEDY.config, 3, seed=1)
    teacher, greedy = MINI.build("tensorflow", seed=0), GREEDY.build("tensorflow")
    greedy.set_weights(teacher.get_weights())
    steps = np.asarray(greedy(src, training=False))
    tokens = steps.argmax(2).astype(np.int32)
    tgt_in = np.concatenate([np.full_like(src[:, :1], BOS_ID), tokens[:, :-1]], 1)
    np.testing.assert_allclose(
        np.asarray(teacher([src, tgt_in], training=False)), steps, rtol=1e-5, atol=1e-6
    )


def test_loss_ignores_padded_positions():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 4, 8)).astype(np.float32)
    labels = np.array([[5, 6, 3, 0], [7, 3, 0, 0]], np.int32)
    z, y = logits[labels != 0], labels[labels != 0]
    want = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y])
    assert float(seq2seq_loss(logits, labels)) == pytest.approx(want, rel=1e-5)


def test_session_trains_and_the_checkpoint_loads_into_the_greedy_network(tmp_path):
    cfg = TrainConfig(
        model=MINI.name,
        framework="tensorflow",
        batch_size=16,
        steps=10,
        warmup_steps=0,
        learning_rate=MINI.default_lr,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = Session(MINI, cfg, synthetic.batches(MINI, 16, 4, seed=0))
    losses = [session.step(i) for i in range(10)]
    assert np.mean(losses[-3:]) < 0.9 * np.mean(losses[:3]), losses
    name = session.save(tmp_path)
    greedy = native.load(GREEDY, tmp_path / name)
    for a, b in zip(greedy.get_weights(), session.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert native.predict(greedy, example_inputs(GREEDY.config, 2)).shape == (2, 12, 64)
