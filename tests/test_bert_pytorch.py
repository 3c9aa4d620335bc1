"""PyTorch BERT: the built network is ``models.bert.walk``'s, its objective is
BERT's, and the harness's training session learns the synthetic pre-training data.

Everything runs bert-tiny, except one batch-1 pass over full-size bert-base.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.pytorch
torch = pytest.importorskip("torch")

import dlbench.models.bert as bert
from dlbench.models.bert.data import bert_pretraining_batches
from dlbench.models.bert.torch import build, forward_macs, pretraining_loss
from dlbench.models.registry import get_model

TINY = get_model("bert-tiny")


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _run(model, inputs):
    with torch.no_grad():
        out = model(*[torch.from_numpy(a) for a in inputs])
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("head", bert.HEADS)
def test_tiny_counts_and_shapes_match_walk(head):
    cfg = TINY.config
    model = build(TINY, seed=0, head=head).eval()
    assert _params(model) == bert.count_parameters(cfg, head)
    inputs = bert.example_inputs(cfg, batch=3)
    assert forward_macs(model, TINY, inputs) == bert.count_macs(cfg, head)
    shapes = [o.shape for o in _run(model, inputs)]
    want = [(3, 2)] if head == "classification" else [(3, 64, cfg["vocab_size"]), (3, 2)]
    assert shapes == want


def test_full_bert_base_counts():
    spec = get_model("bert-base")
    for head, params in (("classification", 102_269_186), ("pretraining", 102_882_442)):
        model = build(spec, seed=0, head=head)
        assert _params(model) == bert.count_parameters(spec.config, head) == params
    # The last model built is the pre-training one: measure it on one sequence.
    assert forward_macs(model.eval(), spec) == bert.count_macs(spec.config, "pretraining") == 13_326_681_600


def test_decoder_is_tied_to_word_embeddings():
    model = build(TINY, seed=0, head="pretraining")
    names = [n for n, _ in model.named_parameters()]
    assert "mlm.decoder.bias" in names and not any("decoder.weight" in n for n in names)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight[5].fill_(0.0)
        model.embeddings.word_embeddings.weight[5, 0] = 100.0
    (mlm, _nsp) = _run(model.eval(), bert.example_inputs(TINY.config, 1))
    # Token 5's logit now follows the first hidden unit: the decoder read the edited table.
    assert np.abs(mlm[..., 5]).max() > 10


def test_padding_and_mask():
    model = build(TINY, seed=1).eval()
    ids, types, mask = bert.example_inputs(TINY.config, batch=4, seed=3)
    assert (mask == 0).any()
    ref = _run(model, (ids, types, mask))[0]
    changed = np.where(mask == 0, (ids + 7) % TINY.config["vocab_size"], ids).astype(np.int32)
    np.testing.assert_allclose(_run(model, (changed, types, mask))[0], ref, atol=1e-5)
    # ...while the same change with every position attended does change the output.
    full = np.ones_like(mask)
    assert np.abs(_run(model, (changed, types, full))[0] - _run(model, (ids, types, full))[0]).max() > 1e-4


def test_dropout_only_in_training():
    model = build(TINY, seed=2)
    inputs = bert.example_inputs(TINY.config, batch=2)
    model.eval()
    np.testing.assert_array_equal(_run(model, inputs)[0], _run(model, inputs)[0])
    model.train()
    torch.manual_seed(0)
    assert not np.array_equal(_run(model, inputs)[0], _run(model, inputs)[0])


def test_seed_makes_weights_reproducible():
    a, b, c = (build(TINY, seed=s).state_dict() for s in (3, 3, 4))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(
        a["encoder.layer.0.attention.self.query.weight"], c["encoder.layer.0.attention.self.query.weight"]
    )


def test_objective_matches_reference():
    rng = np.random.default_rng(0)
    mlm_logits = rng.standard_normal((3, 64, 50)).astype(np.float32) * 3
    nsp_logits = rng.standard_normal((3, 2)).astype(np.float32)
    mlm_labels = np.where(rng.random((3, 64)) < 0.2, rng.integers(0, 50, (3, 64)), -100).astype(np.int32)
    nsp_labels = rng.integers(0, 2, 3).astype(np.int32)
    got = pretraining_loss(
        (torch.from_numpy(mlm_logits), torch.from_numpy(nsp_logits)),
        (torch.from_numpy(mlm_labels), torch.from_numpy(nsp_labels)),
    )
    want = bert.reference_pretraining_loss(mlm_logits, nsp_logits, mlm_labels, nsp_labels)
    assert abs(float(got) - want) < 1e-5 * max(1.0, want)


def test_harness_session_trains_pretraining_objective(tmp_path):
    """The training harness's session (objective looked up by name) learns BERT's data."""
    from dlbench.harness.training.base import TrainConfig
    from dlbench.harness.training.pytorch import Session

    cfg = TrainConfig(
        model="bert-tiny",
        framework="pytorch",
        batch_size=8,
        steps=6,
        warmup_steps=2,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = Session(TINY, cfg, bert_pretraining_batches(TINY, 8, 8, seed=0))
    assert session.model.head == "pretraining"
    losses = [session.step(i) for i in range(8)]
    # Starts at ln(1024) + ln(2) = 7.6 (uniform predictions); measured: 4.1-4.9 after 8 steps.
    assert abs(losses[0] - np.log(2048)) < 0.3
    assert np.mean(losses[-2:]) < 0.8 * losses[0]
    session.save(tmp_path)
    trained = build(TINY, seed=5, head="pretraining")
    trained.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=True))
    net = bert.classification_from_pretraining("pytorch", TINY, trained)
    assert torch.equal(
        net.encoder.layer[1].output.dense.weight, session.model.encoder.layer[1].output.dense.weight
    )


def test_native_load_turns_a_pretraining_checkpoint_into_the_classifier(tmp_path):
    """``dlbench train`` saves the pre-training network; export loads it strictly and
    runs the classification network carrying its encoder (the shared weights differ
    from a fresh build's, so the encoder really came from the checkpoint)."""
    from dlbench.models.native.pytorch import load, predict

    trained = TINY.build_for_training("pytorch", seed=5)
    torch.save(trained.state_dict(), tmp_path / "model.pt")
    net = load(TINY, tmp_path / "model.pt")
    assert not net.training
    x = bert.example_inputs(TINY.config, 2, seed=2)
    assert predict(net, x).shape == (2, TINY.num_classes)
    got, want = net.state_dict(), trained.state_dict()
    fresh = TINY.build("pytorch").state_dict()
    shared = [k for k in got if k.startswith("encoder.")]
    assert shared and all(torch.equal(got[k], want[k]) for k in shared)
    assert not all(torch.equal(got[k], fresh[k]) for k in shared)
