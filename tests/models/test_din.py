"""DIN: the size of the paper's configuration, the AUC tally, the synthetic click rule
and the reader of DIN's Amazon click-log format (no framework); padding and the
unnormalized attention in PyTorch; and in every framework the harness session learning
the click rule (held-out AUC well above 0.5).

Counts in every framework, output shapes and canonical names are tests/models/test_models.py's.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.data import open_dataset, parse
from dlbench.harness.evaluate.scoring import roc_auc, tally_for
from dlbench.models import synthetic
from dlbench.models.din.data import category_of
from dlbench.models.registry import get_model
from tests.utils import per_framework
from tests.utils.frameworks import frameworks

MINI = "din-mini"


def test_din_is_the_papers_amazon_configuration():
    spec = get_model("din")
    cfg = spec.config
    assert (cfg["item_dim"] + cfg["category_dim"], cfg["seq_len"]) == (36, 100)
    assert cfg["attention_units"] == (80, 40) and cfg["mlp_units"] == (200, 80)
    # embeddings 63,001 x 18 + 801 x 18; attention 144-80-40-1; MLP 72-200-80-2; PReLU slopes.
    emb = 63_001 * 18 + 801 * 18
    att = 144 * 80 + 80 + 80 * 40 + 40 + 40 + 1 + 80 + 40
    mlp = 72 * 200 + 200 + 200 * 80 + 80 + 80 * 2 + 2 + 200 + 80
    assert spec.parameter_count == emb + att + mlp == 1_194_559
    assert spec.macs_per_sample == 100 * (144 * 80 + 80 * 40 + 40) + 72 * 200 + 200 * 80 + 160
    assert spec.objective == "ctr" and spec.num_classes == 2
    assert spec.run.int8_mode == "dynamic"


def test_auc_against_hand_counted_pairs_with_ties():
    # Positives 0.8, 0.4, 0.4; negatives 0.4, 0.1.  Pairs (pos > neg) count 1, ties 1/2:
    # 0.8 beats both (2); each 0.4 ties 0.4 (1/2) and beats 0.1 (1): 2 + 1.5 + 1.5 = 5 of 6.
    scores = [0.4, 0.8, 0.1, 0.4, 0.4]
    labels = [1, 1, 0, 0, 1]
    assert roc_auc(scores, labels) == pytest.approx(5 / 6)
    assert roc_auc([0.1, 0.9], [0, 1]) == 1.0 and roc_auc([0.9, 0.1], [0, 1]) == 0.0
    assert roc_auc([0.3, 0.3, 0.3], [0, 1, 1]) == 0.5
    assert np.isnan(roc_auc([0.1, 0.2], [1, 1]))


def test_ctr_tally_ranks_the_logit_difference_over_batches():
    tally = tally_for("ctr")
    tally.add(np.array([[0.0, 2.0], [1.0, 0.0]]), np.array([1, 0]))
    tally.add((np.array([[0.0, -1.0], [0.0, 0.5]]),), np.array([1, 0]))
    out = tally.result()
    # z1 - z0: 2, -1 (pos); -1, 0.5 (neg): pairs 2>-1, 2>0.5, -1=-1 (1/2), -1<0.5 -> 2.5/4.
    assert out["auc"] == pytest.approx(0.625)
    assert out["samples"] == 4 and out["correct"] == 2


def test_synthetic_clicks_are_whether_the_category_was_seen():
    spec = get_model("din-mini")
    (hist, hist_cats, item, cat), clicks = synthetic.batches(spec, 64, 1, seed=3)[0]
    assert hist.shape == hist_cats.shape == (64, 20) and item.shape == cat.shape == (64, 1)
    assert np.array_equal(hist_cats, category_of(hist, 16)) and (hist_cats[hist == 0] == 0).all()
    seen = np.array([cat[b, 0] in set(hist_cats[b]) for b in range(64)])
    assert np.array_equal(seen, clicks.astype(bool)) and 0.3 < clicks.mean() < 0.7
    assert (hist != 0).sum(axis=1).min() >= 5 and (hist == 0).any()  # padded at the end
    # The verifier's and probes' inputs are these, not text-token ids.
    x = synthetic.sample_inputs(spec, 4)
    assert [a.shape for a in x] == [(4, 20), (4, 20), (4, 1), (4, 1)]


def _line(label, item, cat, hist):
    return "\t".join(
        [str(label), "U1", item, cat, "\x02".join(h for h, _ in hist), "\x02".join(c for _, c in hist)]
    )


def test_click_log_reader(tmp_path):
    hist = [(f"B{i:03d}", "Books" if i % 2 else "Clothing, Shoes & Jewelry") for i in range(25)]
    train = [
        _line(1, "B001", "Books", hist),
        _line(0, "B900", "Toys", hist[:3]),
        _line(1, "B002", "Clothing, Shoes & Jewelry", hist[:1]),
        _line(0, "B003", "Books", []),
    ]
    (tmp_path / "local_train_splitByUser").write_text("\n".join(train) + "\n")
    (tmp_path / "local_test_splitByUser").write_text(_line(1, "NEW", "Books", hist[:2]) + "\n")
    spec = get_model("din-mini")
    assert parse(str(tmp_path))[0] == "ctr"
    ds = open_dataset(str(tmp_path), spec)
    ds.prepare()
    assert ds.split_sizes() == {"train": 4, "test": 1} and ds.eval_split == "test"
    (hi, hc, it, ca), y = next(ds.train_batches(4, 0, "NCHW"))
    assert hi.shape == hc.shape == (4, 20) and it.shape == (4, 1) and y.dtype == np.int32
    items, cats = ds.vocab
    assert cats["Books"] == 2 or cats["Clothing, Shoes & Jewelry"] == 2  # most frequent
    (hi, hc, it, ca), y = ds.batch(ds.rows["train"])
    # 25 behaviours, seq 20: the 20 most recent; shorter ones padded with 0 at the end.
    assert list(hi[0]) == [items[h] for h, _ in hist[5:]] and list(y) == [1, 0, 1, 0]
    assert (hi[1, 3:] == 0).all() and (hi[1, :3] > 1).all() and (hi[3] == 0).all()
    assert ca[1, 0] == cats["Toys"] and ca[2, 0] == cats["Clothing, Shoes & Jewelry"]
    (hi, hc, it, ca), y = next(ds.eval_batches(8, "NCHW"))
    assert it[0, 0] == 1 and list(y) == [1]  # unseen item: the unknown id
    # din-mini's item table has 512 rows: ids stay inside it.
    assert max(items.values()) < 512


def test_click_log_reader_refuses_bad_lines_and_other_models(tmp_path):
    bad = tmp_path / "local_train_splitByUser"
    bad.write_text("1\tU\tI\tC\ta\x02b\tx\n")
    ds = open_dataset(f"ctr:{bad}", get_model("din-mini"))
    with pytest.raises(UserError, match="2 history items but 1"):
        ds.prepare()
    assert ds.eval_split is None
    with pytest.raises(UserError, match="click logs"):
        open_dataset(f"ctr:{tmp_path}", get_model("lstm-tiny"))


@pytest.mark.parametrize("framework", frameworks())
def test_session_learns_the_click_rule(framework):
    """dlbench train's session (MindSpore in graph mode, as it runs there)."""
    from dlbench.harness.training.base import TrainConfig

    spec = get_model(MINI)
    cfg = TrainConfig(
        model=MINI,
        framework=framework,
        batch_size=32,
        steps=40,
        warmup_steps=0,
        learning_rate=spec.default_lr,
    )
    session = per_framework.session(framework)(spec, cfg, synthetic.batches(spec, 32, 8, seed=0))
    for i in range(40):
        session.step(i)
    score = session.evaluate(synthetic.batches(spec, 128, 2, seed=99))
    assert score["auc"] > 0.65 and score["samples"] == 256, score


@pytest.mark.pytorch
def test_padding_is_masked_and_weights_are_not_normalized():
    import torch

    def run(model, x):
        with torch.no_grad():
            return model(*[torch.from_numpy(a) for a in x]).numpy()

    spec = get_model(MINI)
    model = spec.build("pytorch", seed=0).eval()
    hist, cats, item, cat = (a.copy() for a in synthetic.sample_inputs(spec, 4, seed=1))
    hist[:, 10:], cats[:, 10:] = 0, 0
    ref = run(model, (hist, cats, item, cat))
    cats[:, 15] = 7  # a category id under padding: no effect
    np.testing.assert_array_equal(run(model, (hist, cats, item, cat)), ref)
    # Twice the same behaviours: a softmax would give the same interest, DIN doubles it.
    double = (np.concatenate([hist[:, :10]] * 2, 1), np.concatenate([cats[:, :10]] * 2, 1))
    keys = model.embed(torch.from_numpy(hist[:, :10]), torch.from_numpy(cats[:, :10]))
    assert not np.allclose(run(model, (*double, item, cat)), ref, atol=1e-4)
    assert keys.shape == (4, 10, 16)
