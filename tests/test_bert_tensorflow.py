"""Keras 3 BERT: the built network is ``models.bert.walk``'s, its objective is
BERT's, it learns, and its ``.keras`` checkpoint reloads.

Everything runs bert-tiny, except building full-size bert-base once.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import dlbench.models.bert as bert
from dlbench.models.bert.data import bert_pretraining_batches
from dlbench.models.bert.keras import build, forward_macs, pretraining_loss
from dlbench.models.registry import get_model

TINY = get_model("bert-tiny")


def _params(model) -> int:
    return sum(math.prod(w.shape) for w in model.trainable_weights)


def _run(model, inputs, training=False):
    out = model(tuple(inputs), training=training)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else (out,))]


@pytest.mark.parametrize("head", bert.HEADS)
def test_tiny_counts_and_shapes_match_walk(head):
    cfg = TINY.config
    model = build(TINY, seed=0, head=head)
    assert _params(model) == bert.count_parameters(cfg, head)
    assert forward_macs(model) == bert.count_macs(cfg, head)
    shapes = [o.shape for o in _run(model, bert.example_inputs(cfg, batch=3))]
    want = [(3, 2)] if head == "classification" else [(3, 64, cfg["vocab_size"]), (3, 2)]
    assert shapes == want


def test_full_bert_base_counts():
    spec = get_model("bert-base")
    model = build(spec, seed=0, head="pretraining")
    assert _params(model) == bert.count_parameters(spec.config, "pretraining") == 102_882_442
    assert forward_macs(model) == bert.count_macs(spec.config, "pretraining")
    del model
    model = build(spec, seed=0)
    assert _params(model) == spec.parameter_count == 102_269_186
    assert forward_macs(model) == spec.macs_per_sample == 11_174_217_216


def test_gelu_is_exact_erf():
    model = build(TINY, seed=0)
    layer = model.get_layer("encoder.layer.0.intermediate.dense")
    x = np.linspace(-4, 4, 9, dtype=np.float32)
    exact = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(np.asarray(layer.activation(x)), exact, atol=1e-6)


def test_padding_and_mask():
    model = build(TINY, seed=1)
    ids, types, mask = bert.example_inputs(TINY.config, batch=4, seed=3)
    ref = _run(model, (ids, types, mask))[0]
    changed = np.where(mask == 0, (ids + 7) % TINY.config["vocab_size"], ids).astype(np.int32)
    np.testing.assert_allclose(_run(model, (changed, types, mask))[0], ref, atol=1e-5)
    full = np.ones_like(mask)
    assert np.abs(_run(model, (changed, types, full))[0] - _run(model, (ids, types, full))[0]).max() > 1e-4


def test_dropout_only_in_training():
    model = build(TINY, seed=2)
    inputs = bert.example_inputs(TINY.config, batch=2)
    np.testing.assert_array_equal(_run(model, inputs)[0], _run(model, inputs)[0])
    assert not np.array_equal(_run(model, inputs, True)[0], _run(model, inputs, True)[0])


def test_objective_matches_reference():
    rng = np.random.default_rng(0)
    mlm_logits = rng.standard_normal((3, 64, 50)).astype(np.float32) * 3
    nsp_logits = rng.standard_normal((3, 2)).astype(np.float32)
    mlm_labels = np.where(rng.random((3, 64)) < 0.2, rng.integers(0, 50, (3, 64)), -100).astype(np.int32)
    nsp_labels = rng.integers(0, 2, 3).astype(np.int32)
    got = float(pretraining_loss((mlm_logits, nsp_logits), (mlm_labels, nsp_labels)))
    want = bert.reference_pretraining_loss(mlm_logits, nsp_logits, mlm_labels, nsp_labels)
    assert abs(got - want) < 1e-5 * max(1.0, want)


def test_harness_session_trains_and_checkpoint_reloads(tmp_path):
    from dlbench.harness.training.base import TrainConfig
    from dlbench.harness.training.tensorflow import Session

    cfg = TrainConfig(
        model="bert-tiny",
        framework="tensorflow",
        batch_size=8,
        steps=6,
        warmup_steps=2,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    batches = bert_pretraining_batches(TINY, 8, 8, seed=0)
    session = Session(TINY, cfg, batches)
    losses = [session.step(i) for i in range(8)]
    assert abs(losses[0] - np.log(2048)) < 0.3
    assert np.mean(losses[-2:]) < 0.8 * losses[0]
    session.save(tmp_path)
    fresh = build(TINY, seed=9, head="pretraining")
    fresh.load_weights(tmp_path / "model.keras")
    for a, b in zip(_run(session.model, batches[0][0]), _run(fresh, batches[0][0])):
        np.testing.assert_array_equal(a, b)
    net = bert.classification_from_pretraining("tensorflow", TINY, fresh)
    np.testing.assert_array_equal(
        net.get_layer("pooler.dense").kernel.numpy(), fresh.get_layer("pooler.dense").kernel.numpy()
    )
