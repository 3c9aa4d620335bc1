"""DeepSpeech2: in every framework its CTC loss is the numpy reference's and it learns
synthetic utterances through the harness session (Keras on NHWC batches, MindSpore in
graph mode); in PyTorch the two LSTM directions are summed and real LibriSpeech-layout
data trains through ``dlbench train``'s loop; in MindSpore the convolutions pad
explicitly (the ONNX exporter misorders Conv2d's unequal pads).

Counts, canonical names and a training step of every zoo family are
tests/models/test_models.py's; transfer across frameworks
tests/models/test_weights_transfer.py's; export tests/harness/convert/test_zoo_export.py's.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.harness.training.base import TrainConfig
from dlbench.models import synthetic
from dlbench.models.deepspeech2 import ctc
from dlbench.models.registry import get_model
from tests.utils import per_framework
from tests.utils.frameworks import frameworks

MINI = "deepspeech2-mini"


def ctc_case(seed: int = 0):
    """Random logits (4, 32, 29) and labels of several lengths, one with a repeated letter."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((4, 32, 29)).astype(np.float32)
    transcripts = np.zeros((4, 12), np.int32)
    targets = [[8, 5, 12, 12, 15], [1], [3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [2, 2]]
    for row, t in enumerate(targets):
        transcripts[row, : len(t)] = t
    lengths = np.array([len(t) for t in targets], np.int32)
    frames = np.array([32, 7, 20, 3], np.int32)
    reference = np.mean([ctc.nll(z, t, f) for z, t, f in zip(logits, targets, frames)])
    return logits, (transcripts, lengths, frames), reference


def _ctc_loss(framework: str, logits: np.ndarray, labels: tuple) -> float:
    """The framework's CTC loss (PyTorch's ctc_loss, tf.nn.ctc_loss, ops.ctc_loss on CPU)."""
    if framework == "pytorch":
        import torch

        from dlbench.models.deepspeech2.torch import ctc_loss

        return float(ctc_loss(torch.from_numpy(logits), tuple(torch.from_numpy(a).long() for a in labels)))
    if framework == "tensorflow":
        import tensorflow as tf

        from dlbench.models.deepspeech2.keras import ctc_loss

        return float(ctc_loss(tf.constant(logits), labels))
    import mindspore as ms

    from dlbench.models.deepspeech2.mindspore import CTCLoss

    return float(CTCLoss()(ms.Tensor(logits), *(ms.Tensor(a) for a in labels)).asnumpy())


def _hidden_biases(framework: str, model) -> dict[str, np.ndarray]:
    """Copies of the LSTMs' ``b_hh`` (PyTorch and MindSpore carry it, frozen at zero)."""
    if framework == "pytorch":
        return {n: p.detach().numpy().copy() for n, p in model.named_parameters() if not p.requires_grad}
    return {p.name: p.asnumpy().copy() for p in model.get_parameters() if ".bias_hh_" in p.name}


@pytest.mark.parametrize("framework", frameworks())
def test_ctc_loss_is_the_mean_negative_log_likelihood(framework):
    logits, labels, reference = ctc_case()
    assert _ctc_loss(framework, logits, labels) == pytest.approx(reference, rel=1e-5)


@pytest.mark.parametrize("framework", frameworks())
def test_session_learns_synthetic_utterances_and_the_checkpoint_reloads(framework, tmp_path):
    spec = get_model(MINI)
    layout = "NHWC" if framework == "tensorflow" else "NCHW"
    cfg = TrainConfig(
        model=MINI,
        framework=framework,
        batch_size=8,
        steps=12,
        warmup_steps=0,
        learning_rate=spec.default_lr,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    session = per_framework.session(framework)(
        spec, cfg, synthetic.batches(spec, 8, 4, seed=0, layout=layout)
    )
    if framework == "mindspore":
        import mindspore as ms

        assert ms.get_context("mode") == ms.GRAPH_MODE
    frozen = _hidden_biases(framework, session.model) if framework != "tensorflow" else {}
    losses = [session.step(i) for i in range(12)]
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3]), losses
    if framework != "tensorflow":
        after = _hidden_biases(framework, session.model)
        assert frozen and all(not after[n].any() for n in frozen)
    score = session.evaluate(synthetic.batches(spec, 8, 1, seed=9, layout=layout))
    assert set(score) >= {"loss", "accuracy", "cer"} and score["samples"] == 8 and 0 <= score["cer"]
    if framework == "pytorch":
        native = per_framework.native(framework)
        name = session.save(tmp_path)
        loaded = native.load(spec, tmp_path / name)
        x = synthetic.sample_inputs(spec, 2, seed=3)
        session.model.eval()
        np.testing.assert_array_equal(native.predict(loaded, x), native.predict(session.model, x))


# --- PyTorch: the summed directions, real data through the training loop ------------------


@pytest.mark.pytorch
def test_directions_are_summed_and_frozen_hidden_biases_stay_zero():
    import torch

    spec = get_model(MINI)
    model = spec.build("pytorch", seed=0).eval()
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen and all(".bias_hh_" in n for n in frozen)
    x = torch.from_numpy(synthetic.sample_inputs(spec, 2)[0])
    with torch.no_grad():
        h = torch.clamp(model.bn1(model.conv1(x)), 0, 20)
        h = torch.clamp(model.bn2(model.conv2(h)), 0, 20)
        assert h.shape == (2, 8, 41, 32)
        h = h.permute(0, 3, 1, 2).reshape(2, 32, 8 * 41)  # frame features, channel-major
        for lstm in model.rnn:
            out, _ = lstm(h)
            h = out[..., :32] + out[..., 32:]
        torch.testing.assert_close(model(x), model.fc(h))


@pytest.mark.pytorch
def test_librispeech_folder_trains_and_scores_through_the_shared_loop(tmp_path):
    """Real data (wav + transcripts the test writes) through ``dlbench train``'s loop with
    --eval: per-step batches from the reader, CER on the dev split."""
    from dlbench.harness.training import loop
    from tests.utils.datasets import write_librispeech

    write_librispeech(
        tmp_path / "ls",
        {
            "train-clean-100": [(t, 0.3) for t in ("one", "two", "three", "four", "five")],
            "dev-clean": [("six", 0.3), ("seven", 0.3), ("eight", 0.35)],
        },
    )
    cfg = TrainConfig(
        model=MINI,
        framework="pytorch",
        batch_size=2,
        steps=2,
        warmup_steps=1,
        data=str(tmp_path / "ls"),
        eval=True,
        intra_op_threads=1,
        inter_op_threads=1,
    )
    r = loop.run(cfg, tmp_path / "out")
    assert r["data"]["reader"] == "librispeech"
    assert r["data"]["splits"] == {"train": 5, "test": 3} and r["data"]["skipped"] == 0
    assert len(r["data_time_s"]) == 2 and all(t > 0 for t in r["data_time_s"])
    ev = r["eval"]
    assert ev["samples"] == 3 and ev["split"] == "test" and ev["cer"] >= 0
    assert 0 < ev["loss"] < 1000


# --- MindSpore: explicit padding ------------------------------------------------------------


@pytest.mark.mindspore
def test_convolutions_pad_explicitly():
    model = get_model(MINI).build("mindspore", seed=0)
    assert {model.conv1.pad_mode, model.conv2.pad_mode} == {"valid"}
    assert model.pad1.paddings == ((0, 0), (0, 0), (20, 20), (5, 5))
