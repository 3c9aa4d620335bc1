"""DIN in Keras 3: the harness session learns the synthetic click rule (held-out AUC)."""

from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.tensorflow import Session
from dlbench.models import synthetic
from dlbench.models.registry import get_model


def test_session_learns_the_click_rule():
    spec = get_model("din-mini")
    cfg = TrainConfig(
        model="din-mini",
        framework="tensorflow",
        batch_size=32,
        steps=40,
        warmup_steps=0,
        learning_rate=spec.default_lr,
    )
    session = Session(spec, cfg, synthetic.batches(spec, 32, 8, seed=0))
    for i in range(40):
        session.step(i)
    score = session.evaluate(synthetic.batches(spec, 128, 2, seed=99))
    assert score["auc"] > 0.65, score
