"""The MindSpore LSTM classifier is the spec's network (b_hh frozen at zero, PyTorch's
parameter names) and it trains on synthetic token data through the harness session."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("GLOG_v", "3")
ms = pytest.importorskip("mindspore")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.mindspore import Session
from dlbench.models import synthetic
from dlbench.models.counting.mindspore import forward_macs, trainable_parameters
from dlbench.models.native import mindspore as native
from dlbench.models.registry import get_model

TINY = "lstm-tiny"


@pytest.mark.parametrize(
    "name,params,macs", [("lstm-tiny", 14_658, 327_744), ("lstm", 6_562_002, 280_000_400)]
)
def test_counts_match_the_analytic_walk(name, params, macs):
    spec = get_model(name)
    model = spec.build("mindspore")
    assert trainable_parameters(model) == spec.parameter_count == params
    assert forward_macs(model, spec) == spec.macs_per_sample == macs


def test_parameters_carry_pytorch_names_and_frozen_zero_hidden_biases():
    spec = get_model(TINY)
    model = spec.build("mindspore", seed=0)
    params = {p.name: p for p in model.get_parameters()}
    assert {
        "embedding.embedding_table",
        "lstm.0.weight_ih_l0",
        "lstm.1.bias_hh_l0_reverse",
        "fc.weight",
        "fc.bias",
    } <= set(params)
    frozen = [n for n, p in params.items() if not p.requires_grad]
    assert frozen and all(".bias_hh_" in n for n in frozen)
    assert all(float(np.abs(params[n].asnumpy()).max()) == 0.0 for n in frozen)


def test_same_seed_same_weights():
    spec = get_model(TINY)
    a = spec.build("mindspore", seed=7).lstm[0].w_ih_list[0].asnumpy()
    b = spec.build("mindspore", seed=7).lstm[0].w_ih_list[0].asnumpy()
    np.testing.assert_array_equal(a, b)


def test_session_trains_on_token_batches_and_the_checkpoint_reloads(tmp_path):
    spec = get_model(TINY)
    cfg = TrainConfig(
        model=TINY,
        framework="mindspore",
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
    hidden_bias = {p.name: p.asnumpy() for p in session.model.get_parameters() if ".bias_hh_" in p.name}
    assert all(float(np.abs(v).max()) == 0.0 for v in hidden_bias.values())
    name = session.save(tmp_path)
    loaded = native.load(spec, tmp_path / name)
    session.model.set_train(False)
    ids = synthetic.sample_inputs(spec, 4, seed=3)
    np.testing.assert_allclose(
        native.predict(loaded, ids), native.predict(session.model, ids), rtol=0, atol=1e-6
    )
