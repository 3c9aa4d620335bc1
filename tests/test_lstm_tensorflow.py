"""The Keras LSTM classifier is the spec's network (one bias per gate set, PyTorch's
initialization) and it trains on synthetic token data through the harness session."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.tensorflow import Session
from dlbench.models import synthetic
from dlbench.models.counting.tensorflow import forward_macs, trainable_parameters
from dlbench.models.native import tensorflow as native
from dlbench.models.registry import get_model

TINY = "lstm-tiny"
pytestmark = pytest.mark.filterwarnings("ignore:TensorFlow.s runtime was already initialized")


@pytest.mark.parametrize(
    "name,params,macs", [("lstm-tiny", 14_658, 327_744), ("lstm", 6_562_002, 280_000_400)]
)
def test_counts_match_the_analytic_walk(name, params, macs):
    spec = get_model(name)
    model = spec.build("tensorflow")
    assert trainable_parameters(model) == spec.parameter_count == params
    assert forward_macs(model, spec) == spec.macs_per_sample == macs


def test_layers_are_named_like_pytorch_modules_and_use_its_gate_math():
    spec = get_model(TINY)
    model = spec.build("tensorflow", seed=0)
    names = [layer.name for layer in model.layers]
    assert {"embedding", "lstm.0", "lstm.1", "fc"} <= set(names)
    # Keras' LSTM cell is PyTorch's: sigmoid gates, tanh cell, gates i, f, c, o.
    cell = model.get_layer("lstm.0").forward_layer.cell
    assert cell.recurrent_activation.__name__ == "sigmoid" and cell.activation.__name__ == "tanh"
    hidden = spec.config["hidden_size"]
    x = np.random.default_rng(0).standard_normal((1, cell.kernel.shape[0])).astype(np.float32)
    k, b = np.asarray(cell.kernel), np.asarray(cell.bias)
    z = x @ k + b  # one step from a zero state
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731 - a one-line helper used right here
    i, g, o = sig(z[:, :hidden]), np.tanh(z[:, 2 * hidden : 3 * hidden]), sig(z[:, 3 * hidden :])
    want = o * np.tanh(i * g)
    got = np.asarray(cell(x, [np.zeros((1, hidden), np.float32)] * 2)[0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_session_trains_on_token_batches_and_the_checkpoint_reloads(tmp_path):
    spec = get_model(TINY)
    cfg = TrainConfig(
        model=TINY,
        framework="tensorflow",
        batch_size=8,
        steps=10,
        warmup_steps=0,
        learning_rate=0.5,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = Session(spec, cfg, synthetic.batches(spec, 8, 4, seed=0))
    losses = [session.step(i) for i in range(12)]
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3]), losses
    name = session.save(tmp_path)
    loaded = native.load(spec, tmp_path / name)
    ids = synthetic.sample_inputs(spec, 4, seed=3)
    np.testing.assert_allclose(
        native.predict(loaded, ids), native.predict(session.model, ids), rtol=0, atol=1e-6
    )
