"""The PyTorch LSTM classifier is the spec's network, with one trainable bias per gate set,
and it trains on synthetic token data through the harness session."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.pytorch import Session
from dlbench.models import synthetic
from dlbench.models.counting.pytorch import forward_macs, trainable_parameters
from dlbench.models.native import pytorch as native
from dlbench.models.registry import get_model

TINY = "lstm-tiny"


@pytest.mark.parametrize(
    "name,params,macs", [("lstm-tiny", 14_658, 327_744), ("lstm", 6_562_002, 280_000_400)]
)
def test_counts_match_the_analytic_walk(name, params, macs):
    spec = get_model(name)
    model = spec.build("pytorch")
    assert trainable_parameters(model) == spec.parameter_count == params
    assert forward_macs(model, spec) == spec.macs_per_sample == macs


def test_hidden_biases_are_frozen_zeros_and_the_classifier_reads_final_states():
    spec = get_model(TINY)
    model = spec.build("pytorch", seed=0).eval()
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen and all(".bias_hh_" in n for n in frozen)
    assert all(float(p.abs().max()) == 0.0 for n, p in model.named_parameters() if n in frozen)
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


def test_session_trains_on_token_batches_and_the_checkpoint_reloads(tmp_path):
    spec = get_model(TINY)
    cfg = TrainConfig(
        model=TINY,
        framework="pytorch",
        batch_size=8,
        steps=10,
        warmup_steps=0,
        learning_rate=0.5,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = Session(spec, cfg, synthetic.batches(spec, 8, 4, seed=0))
    before = {n: p.detach().clone() for n, p in session.model.named_parameters()}
    losses = [session.step(i) for i in range(12)]
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3]), losses
    after = dict(session.model.named_parameters())
    assert all(torch.equal(before[n], after[n]) for n in before if ".bias_hh_" in n)
    assert not torch.equal(before["lstm.0.weight_ih_l0"], after["lstm.0.weight_ih_l0"])
    name = session.save(tmp_path)
    loaded = native.load(spec, tmp_path / name)
    ids = synthetic.sample_inputs(spec, 4, seed=3)
    session.model.eval()
    np.testing.assert_array_equal(native.predict(loaded, ids), native.predict(session.model, ids))
