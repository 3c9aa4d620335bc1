"""GNMT in every framework: the walk's counts (in Keras every call of a shared layer
counted) with PyTorch's layer names and frozen zero hidden biases, the greedy decoder is
the teacher-forced one fed its own arg-max, the seq2seq loss ignores padding, and the
harness session (MindSpore's in graph mode) trains on synthetic pairs, its checkpoint
loading into the greedy network; in PyTorch also at full size and on parallel text.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.harness.training.base import TrainConfig
from dlbench.models import synthetic
from dlbench.models.gnmt import BOS_ID, example_inputs
from dlbench.models.registry import get_model
from tests.utils import per_framework
from tests.utils.frameworks import frameworks

MINI, GREEDY = get_model("gnmt-mini"), get_model("gnmt-mini-greedy")
pytestmark = pytest.mark.filterwarnings("ignore:TensorFlow.s runtime was already initialized")


def _values(framework: str, model) -> dict:
    """The network's weights as arrays: by parameter name, or Keras' by position."""
    if framework == "pytorch":
        return {n: p.detach().numpy() for n, p in model.named_parameters()}
    if framework == "tensorflow":
        return dict(enumerate(model.get_weights()))
    return {p.name: p.asnumpy() for p in model.get_parameters()}


def _frozen(framework: str, model) -> dict[str, np.ndarray]:
    """The parameters training leaves alone (PyTorch's and MindSpore's ``b_hh``)."""
    if framework == "pytorch":
        return {n: p.detach().numpy() for n, p in model.named_parameters() if not p.requires_grad}
    return {p.name: p.asnumpy() for p in model.get_parameters() if not p.requires_grad}


def _eval(framework: str, model, *inputs: np.ndarray) -> np.ndarray:
    """Inference-mode output of a network called on ``inputs``."""
    if framework == "pytorch":
        import torch

        with torch.no_grad():
            return model.eval()(*map(torch.from_numpy, inputs)).numpy()
    if framework == "tensorflow":
        return np.asarray(model(inputs[0] if len(inputs) == 1 else list(inputs), training=False))
    import mindspore as ms

    model.set_train(False)
    return model(*map(ms.Tensor, inputs)).asnumpy()


def _copy_weights(framework: str, source, target) -> None:
    if framework == "pytorch":
        target.load_state_dict(source.state_dict())
    elif framework == "tensorflow":
        target.set_weights(source.get_weights())
    else:
        import mindspore as ms

        ms.load_param_into_net(target, {p.name: p for p in source.get_parameters()}, strict_load=True)


def _loss(framework: str, logits: np.ndarray, labels: np.ndarray) -> float:
    if framework == "pytorch":
        import torch

        from dlbench.models.gnmt.torch import seq2seq_loss

        return float(seq2seq_loss(torch.from_numpy(logits), torch.from_numpy(labels).long()))
    if framework == "tensorflow":
        from dlbench.models.gnmt.keras import seq2seq_loss

        return float(seq2seq_loss(logits, labels))
    import mindspore as ms

    from dlbench.models.gnmt.mindspore import Seq2SeqLoss

    return float(Seq2SeqLoss()(ms.Tensor(logits), ms.Tensor(labels)).asnumpy())


def _session(framework: str, batches):
    cfg = TrainConfig(
        model=MINI.name,
        framework=framework,
        batch_size=16,
        steps=10,
        warmup_steps=0,
        learning_rate=MINI.default_lr,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    return per_framework.session(framework)(MINI, cfg, batches)


@pytest.mark.parametrize("framework", frameworks())
@pytest.mark.parametrize("name", ["gnmt-mini", "gnmt-mini-greedy"])
def test_counts_match_the_analytic_walk(framework, name):
    spec = get_model(name)
    counting = per_framework.counting(framework)
    model = spec.build(framework)
    assert counting.trainable_parameters(model) == spec.parameter_count == 97_536
    assert counting.forward_macs(model, spec) == spec.macs_per_sample == 1_139_712
    if framework == "tensorflow":
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
    else:
        frozen = _frozen(framework, model)
        assert len(frozen) == 9 and all(float(np.abs(v).max()) == 0 for v in frozen.values())


@pytest.mark.parametrize("framework", frameworks())
def test_greedy_is_the_teacher_forced_decoder_fed_its_own_arg_max(framework):
    (src,) = example_inputs(GREEDY.config, 3, seed=1)
    teacher, greedy = MINI.build(framework, seed=0), GREEDY.build(framework)
    _copy_weights(framework, teacher, greedy)
    steps = _eval(framework, greedy, src)
    tokens = steps.argmax(2).astype(np.int32)
    tgt_in = np.concatenate([np.full_like(src[:, :1], BOS_ID), tokens[:, :-1]], 1)
    np.testing.assert_allclose(_eval(framework, teacher, src, tgt_in), steps, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("framework", frameworks())
def test_loss_ignores_padded_positions(framework):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 4, 8)).astype(np.float32)
    labels = np.array([[5, 6, 3, 0], [7, 3, 0, 0]], np.int32)
    z, y = logits[labels != 0], labels[labels != 0]
    want = np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y])
    assert _loss(framework, logits, labels) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("framework", frameworks())
def test_session_trains_and_the_checkpoint_loads_into_the_greedy_network(framework, tmp_path):
    native = per_framework.native(framework)
    session = _session(framework, synthetic.batches(MINI, 16, 4, seed=0))
    losses = [session.step(i) for i in range(10)]
    assert np.mean(losses[-3:]) < 0.9 * np.mean(losses[:3]), losses
    name = session.save(tmp_path)
    greedy = native.load(GREEDY, tmp_path / name)
    if framework == "pytorch":
        assert greedy.decoder_kind == "greedy"
    ours = _values(framework, session.model)
    assert all(np.array_equal(v, ours[k]) for k, v in _values(framework, greedy).items())
    assert native.predict(greedy, example_inputs(GREEDY.config, 2)).shape == (2, 12, 64)


# --- PyTorch: full size, parallel text ---------------------------------------------------


@pytest.mark.pytorch
def test_full_size_parameters_and_frozen_hidden_biases():
    from dlbench.models.counting.pytorch import trainable_parameters

    spec = get_model("gnmt")
    model = spec.build("pytorch")
    assert trainable_parameters(model) == spec.parameter_count == 159_978_752
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert len(frozen) == 9 and all(".bias_hh_l0" in n for n in frozen)
    assert all(float(p.abs().max()) == 0.0 for n, p in model.named_parameters() if n in frozen)


@pytest.mark.pytorch
def test_session_trains_on_parallel_text(tmp_path):
    from dlbench.harness.data import open_dataset

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(20)]
    lines = [" ".join(rng.choice(words, rng.integers(3, 10))) for _ in range(64)]
    (tmp_path / "train.en").write_text("\n".join(lines) + "\n")
    (tmp_path / "train.de").write_text("\n".join(f"x{s}" for s in lines) + "\n")
    ds = open_dataset(str(tmp_path / "train.en"), MINI)
    ds.prepare()
    feed = ds.train_batches(16, seed=0, layout="NCHW")
    session = _session("pytorch", [next(feed) for _ in range(4)])
    losses = [session.step(i) for i in range(8)]
    assert np.mean(losses[-2:]) < np.mean(losses[:2]), losses
