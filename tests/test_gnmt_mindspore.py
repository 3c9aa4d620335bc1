"""GNMT in MindSpore: the walk's counts, frozen zero hidden biases, the greedy decoder is
the teacher-forced one fed its own arg-max, and the harness session (graph mode) trains
with the padding-free loss, its checkpoint loading into the greedy network."""

from __future__ import annotations

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.mindspore import Session
from dlbench.models import synthetic
from dlbench.models.counting.mindspore import forward_macs, trainable_parameters
from dlbench.models.gnmt import BOS_ID, example_inputs
from dlbench.models.gnmt.mindspore import Seq2SeqLoss
from dlbench.models.native import mindspore as native
from dlbench.models.registry import get_model

MINI, GREEDY = get_model("gnmt-mini"), get_model("gnmt-mini-greedy")


@pytest.mark.parametrize("name", ["gnmt-mini", "gnmt-mini-greedy"])
def test_counts_match_the_analytic_walk_and_hidden_biases_are_frozen_zeros(name):
    spec = get_model(name)
    model = spec.build("mindspore")
    assert trainable_parameters(model) == spec.parameter_count == 97_536
    assert forward_macs(model, spec) == spec.macs_per_sample == 1_139_712
    frozen = [p for p in model.get_parameters() if not p.requires_grad]
    assert len(frozen) == 9 and all(float(np.abs(p.asnumpy()).max()) == 0 for p in frozen)


def test_greedy_is_the_teacher_forced_decoder_fed_its_own_arg_max():
    (src,) = example_inputs(GREEDY.config, 3, seed=1)
    teacher, greedy = MINI.build("mindspore", seed=0), GREEDY.build("mindspore")
    ms.load_param_into_net(greedy, {p.name: p for p in teacher.get_parameters()}, strict_load=True)
    teacher.set_train(False)
    greedy.set_train(False)
    steps = greedy(ms.Tensor(src)).asnumpy()
    tokens = steps.argmax(2).astype(np.int32)
    tgt_in = np.concatenate([np.full_like(src[:, :1], BOS_ID), tokens[:, :-1]], 1)
    np.testing.assert_allclose(
        teacher(ms.Tensor(src), ms.Tensor(tgt_in)).asnumpy(), steps, rtol=1e-5, atol=1e-6
    )


def test_loss_ignores_padded_positions():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 4, 8)).astype(np.float32)
    labels = np.array([[5, 6, 3, 0], [7, 3, 0, 0]], np.int32)
    z, y = logits[labels != 0], labels[labels != 0]
    want = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y])
    got = Seq2SeqLoss()(ms.Tensor(logits), ms.Tensor(labels)).asnumpy()
    assert float(got) == pytest.approx(want, rel=1e-5)


def test_session_trains_and_the_checkpoint_loads_into_the_greedy_network(tmp_path):
    cfg = TrainConfig(
        model=MINI.name,
        framework="mindspore",
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
    ours = {p.name: p.asnumpy() for p in session.model.get_parameters()}
    assert all(np.array_equal(p.asnumpy(), ours[p.name]) for p in greedy.get_parameters())
    assert native.predict(greedy, example_inputs(GREEDY.config, 2)).shape == (2, 12, 64)
