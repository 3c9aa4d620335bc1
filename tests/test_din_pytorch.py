"""DIN in PyTorch: padding is masked out, the attention is not normalized, and the
harness session learns the synthetic click rule (held-out AUC well above 0.5)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.pytorch import Session
from dlbench.models import synthetic
from dlbench.models.registry import get_model

MINI = "din-mini"


def _run(model, x):
    with torch.no_grad():
        return model(*[torch.from_numpy(a) for a in x]).numpy()


def test_padding_is_masked_and_weights_are_not_normalized():
    spec = get_model(MINI)
    model = spec.build("pytorch", seed=0).eval()
    hist, cats, item, cat = (a.copy() for a in synthetic.sample_inputs(spec, 4, seed=1))
    hist[:, 10:], cats[:, 10:] = 0, 0
    ref = _run(model, (hist, cats, item, cat))
    cats[:, 15] = 7  # a category id under padding: no effect
    np.testing.assert_array_equal(_run(model, (hist, cats, item, cat)), ref)
    # Twice the same behaviours: a softmax would give the same interest, DIN doubles it.
    double = (np.concatenate([hist[:, :10]] * 2, 1), np.concatenate([cats[:, :10]] * 2, 1))
    keys = model.embed(torch.from_numpy(hist[:, :10]), torch.from_numpy(cats[:, :10]))
    assert not np.allclose(_run(model, (*double, item, cat)), ref, atol=1e-4)
    assert keys.shape == (4, 10, 16)


def test_session_learns_the_click_rule():
    spec = get_model(MINI)
    cfg = TrainConfig(
        model=MINI,
        framework="pytorch",
        batch_size=32,
        steps=40,
        warmup_steps=0,
        learning_rate=spec.default_lr,
    )
    session = Session(spec, cfg, synthetic.batches(spec, 32, 8, seed=0))
    for i in range(40):
        session.step(i)
    score = session.evaluate(synthetic.batches(spec, 128, 2, seed=99))
    assert score["auc"] > 0.65 and score["samples"] == 256, score
