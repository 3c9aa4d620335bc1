"""GNMT in PyTorch: the walk's counts, the greedy decoder is the teacher-forced one fed
its own arg-max, the seq2seq loss ignores padding, and the harness session trains on
synthetic pairs and on parallel text, its checkpoint loading into the greedy network."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlbench.harness.data import open_dataset
from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.pytorch import Session
from dlbench.models import synthetic
from dlbench.models.counting.pytorch import forward_macs, trainable_parameters
from dlbench.models.gnmt import BOS_ID, example_inputs
from dlbench.models.gnmt.torch import seq2seq_loss
from dlbench.models.native import pytorch as native
from dlbench.models.registry import get_model

MINI, GREEDY = get_model("gnmt-mini"), get_model("gnmt-mini-greedy")


@pytest.mark.parametrize("name", ["gnmt-mini", "gnmt-mini-greedy"])
def test_counts_match_the_analytic_walk(name):
    spec = get_model(name)
    model = spec.build("pytorch")
    assert trainable_parameters(model) == spec.parameter_count == 97_536
    assert forward_macs(model, spec) == spec.macs_per_sample == 1_139_712


def test_full_size_parameters_and_frozen_hidden_biases():
    spec = get_model("gnmt")
    model = spec.build("pytorch")
    assert trainable_parameters(model) == spec.parameter_count == 159_978_752
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert len(frozen) == 9 and all(".bias_hh_l0" in n for n in frozen)
    assert all(float(p.abs().max()) == 0.0 for n, p in model.named_parameters() if n in frozen)


def test_greedy_is_the_teacher_forced_decoder_fed_its_own_arg_max():
    (src,) = example_inputs(GREEDY.config, 3, seed=1)
    teacher, greedy = MINI.build("pytorch", seed=0).eval(), GREEDY.build("pytorch").eval()
    greedy.load_state_dict(teacher.state_dict())
    x = torch.from_numpy(src)
    with torch.no_grad():
        steps = greedy(x)
        tokens = steps.argmax(2).to(torch.int32)
        tgt_in = torch.cat((torch.full_like(x[:, :1], BOS_ID), tokens[:, :-1]), 1)
        torch.testing.assert_close(teacher(x, tgt_in), steps, rtol=1e-5, atol=1e-6)


def test_loss_ignores_padded_positions():
    logits = torch.randn(2, 4, 8)
    labels = torch.tensor([[5, 6, 3, 0], [7, 3, 0, 0]])
    keep = labels != 0
    want = torch.nn.functional.cross_entropy(logits[keep], labels[keep])
    torch.testing.assert_close(seq2seq_loss(logits, labels), want)


def _session(batches):
    cfg = TrainConfig(
        model=MINI.name,
        framework="pytorch",
        batch_size=16,
        steps=10,
        warmup_steps=0,
        learning_rate=MINI.default_lr,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    return Session(MINI, cfg, batches)


def test_session_trains_and_the_checkpoint_loads_into_the_greedy_network(tmp_path):
    session = _session(synthetic.batches(MINI, 16, 4, seed=0))
    losses = [session.step(i) for i in range(10)]
    assert np.mean(losses[-3:]) < 0.9 * np.mean(losses[:3]), losses
    name = session.save(tmp_path)
    greedy = native.load(GREEDY, tmp_path / name)
    assert greedy.decoder_kind == "greedy"
    ours = dict(session.model.named_parameters())
    assert all(torch.equal(p, ours[n]) for n, p in greedy.named_parameters())
    assert native.predict(greedy, example_inputs(GREEDY.config, 2)).shape == (2, 12, 64)


def test_session_trains_on_parallel_text(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(20)]
    lines = [" ".join(rng.choice(words, rng.integers(3, 10))) for _ in range(64)]
    (tmp_path / "train.en").write_text("\n".join(lines) + "\n")
    (tmp_path / "train.de").write_text("\n".join(f"x{s}" for s in lines) + "\n")
    ds = open_dataset(str(tmp_path / "train.en"), MINI)
    ds.prepare()
    feed = ds.train_batches(16, seed=0, layout="NCHW")
    session = _session([next(feed) for _ in range(4)])
    losses = [session.step(i) for i in range(8)]
    assert np.mean(losses[-2:]) < np.mean(losses[:2]), losses
