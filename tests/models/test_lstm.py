"""The LSTM classifier is the spec's network in every framework, and it trains on
synthetic token data through the harness session, its checkpoint reloading.

PyTorch and MindSpore carry two biases per gate set, ``b_hh`` frozen at zero (so the
count is the spec's one bias per gate set, as Keras has it), under PyTorch's parameter
names; Keras uses PyTorch's gate math and initialization.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.harness.training.base import TrainConfig
from dlbench.models import synthetic
from dlbench.models.registry import get_model
from tests.utils import per_framework
from tests.utils.frameworks import frameworks

TINY = "lstm-tiny"
pytestmark = pytest.mark.filterwarnings("ignore:TensorFlow.s runtime was already initialized")


def _parameters(framework: str, model) -> dict[str, tuple[bool, np.ndarray]]:
    """name: (trainable, a copy of the value), in PyTorch or MindSpore (the same names)."""
    if framework == "pytorch":
        return {n: (p.requires_grad, p.detach().numpy().copy()) for n, p in model.named_parameters()}
    return {p.name: (p.requires_grad, p.asnumpy().copy()) for p in model.get_parameters()}


@pytest.mark.parametrize("framework", frameworks())
@pytest.mark.parametrize(
    "name,params,macs", [("lstm-tiny", 14_658, 327_744), ("lstm", 6_562_002, 280_000_400)]
)
def test_counts_match_the_analytic_walk(framework, name, params, macs):
    spec = get_model(name)
    counting = per_framework.counting(framework)
    model = spec.build(framework)
    assert counting.trainable_parameters(model) == spec.parameter_count == params
    assert counting.forward_macs(model, spec) == spec.macs_per_sample == macs


@pytest.mark.parametrize("framework", frameworks("pytorch", "mindspore"))
def test_hidden_biases_are_frozen_zeros(framework):
    params = _parameters(framework, get_model(TINY).build(framework, seed=0))
    frozen = [n for n, (trainable, _) in params.items() if not trainable]
    assert frozen and all(".bias_hh_" in n for n in frozen)
    assert all(float(np.abs(params[n][1]).max()) == 0.0 for n in frozen)


@pytest.mark.parametrize("framework", frameworks())
def test_session_trains_on_token_batches_and_the_checkpoint_reloads(framework, tmp_path):
    spec = get_model(TINY)
    native = per_framework.native(framework)
    cfg = TrainConfig(
        model=TINY,
        framework=framework,
        batch_size=8,
        steps=10,
        warmup_steps=0,
        learning_rate=0.5,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = per_framework.session(framework)(spec, cfg, synthetic.batches(spec, 8, 4, seed=0))
    if framework != "tensorflow":
        before = _parameters(framework, session.model)
    losses = [session.step(i) for i in range(12)]
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3]), losses
    if framework != "tensorflow":
        # The frozen hidden biases stay zero while the rest learns.
        after = _parameters(framework, session.model)
        hidden = [n for n in after if ".bias_hh_" in n]
        assert hidden and all(not after[n][1].any() for n in hidden)
        assert all(np.array_equal(before[n][1], after[n][1]) for n in hidden)
        assert not np.array_equal(before["lstm.0.weight_ih_l0"][1], after["lstm.0.weight_ih_l0"][1])
    name = session.save(tmp_path)
    loaded = native.load(spec, tmp_path / name)
    if framework == "pytorch":
        session.model.eval()
    elif framework == "mindspore":
        session.model.set_train(False)
    ids = synthetic.sample_inputs(spec, 4, seed=3)
    got, want = native.predict(loaded, ids), native.predict(session.model, ids)
    if framework == "pytorch":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


# --- PyTorch: the classifier reads the final states --------------------------------------


@pytest.mark.pytorch
def test_the_classifier_reads_final_states():
    import torch

    spec = get_model(TINY)
    model = spec.build("pytorch", seed=0).eval()
    (ids,) = synthetic.sample_inputs(spec, 3)
    x = torch.from_numpy(ids)
    with torch.no_grad():
        h = model.embedding(x)
        for lstm in model.lstm:
            h, (h_n, _) = lstm(h)
        # Forward state after the last token, backward state after the first.
        hidden = spec.config["hidden_size"]
        assert torch.allclose(h_n[0], h[:, -1, :hidden])
        assert torch.allclose(h_n[1], h[:, 0, hidden:])
        assert torch.allclose(model(x), model.fc(torch.cat((h_n[0], h_n[1]), 1)))


# --- Keras: PyTorch's layer names and gate math -------------------------------------------


@pytest.mark.tensorflow
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


# --- MindSpore: PyTorch's parameter names, seeding ----------------------------------------


@pytest.mark.mindspore
def test_parameters_carry_pytorch_names():
    model = get_model(TINY).build("mindspore", seed=0)
    assert {
        "embedding.embedding_table",
        "lstm.0.weight_ih_l0",
        "lstm.1.bias_hh_l0_reverse",
        "fc.weight",
        "fc.bias",
    } <= {p.name for p in model.get_parameters()}


@pytest.mark.mindspore
def test_same_seed_same_weights():
    spec = get_model(TINY)
    a = spec.build("mindspore", seed=7).lstm[0].w_ih_list[0].asnumpy()
    b = spec.build("mindspore", seed=7).lstm[0].w_ih_list[0].asnumpy()
    np.testing.assert_array_equal(a, b)
