"""BERT's analytic counts and synthetic pre-training data (no framework imported)."""

from __future__ import annotations

import numpy as np

import dlbench.models.bert as bert
from dlbench.models.bert.data import BRANCH, bert_pretraining_batches
from dlbench.models.registry import get_model
from dlbench.models.synthetic import specials


def test_presets_are_the_published_sizes():
    base, large = get_model("bert-base"), get_model("bert-large")
    # Hugging Face's bert-base-chinese BertModel (with pooler) has 102,267,648
    # parameters; the 2-way classifier adds 768 * 2 + 2.
    assert base.parameter_count == 102_267_648 + 1_538
    assert large.parameter_count == 325_524_482
    assert (
        large.config["layers"],
        large.config["hidden"],
        large.inputs[0].shape,
        large.config["vocab_size"],
        large.default_batch_size,
    ) == (24, 1024, (128,), 21128, 96)
    assert bert.count_macs(base.config, "classification") == base.macs_per_sample == 11_174_217_216
    assert all(s.objective == "bert-pretraining" for s in (base, large, get_model("bert-tiny")))


def test_pretraining_batches_layout_and_masking():
    spec = get_model("bert-tiny")
    sp = specials(spec)
    batches = bert_pretraining_batches(spec, 16, 3, seed=7)
    again = bert_pretraining_batches(spec, 16, 3, seed=7)
    masked = words = 0
    for ((ids, types, mask), (mlm, nsp)), ((ids2, _, _), _) in zip(batches, again):
        np.testing.assert_array_equal(ids, ids2)  # seeded
        assert ids.shape == types.shape == mask.shape == mlm.shape == (16, 64)
        assert all(a.dtype == np.int32 for a in (ids, types, mask, mlm, nsp))
        assert set(np.unique(nsp)) <= {0, 1} and set(np.unique(types)) <= {0, 1}
        assert (ids[:, 0] == sp["cls_id"]).all()
        assert ((mlm != -100).sum(axis=1) >= 1).all()  # every row predicts
        assert (mask[mlm != -100] == 1).all() and (ids[mask == 0] == sp["pad_id"]).all()
        assert ((types == 1) <= (mask == 1)).all()
        real = mask.sum(axis=1)
        assert (ids[np.arange(16), real - 1] == sp["sep_id"]).all()
        masked += int((mlm != -100).sum())
        words += int(((ids > max(sp.values())) | (mlm != -100)).sum())
    assert 0.12 < masked / words < 0.18


def test_segments_follow_the_chain():
    """Inside segment A every word has at most BRANCH successors: MLM is learnable."""
    spec = get_model("bert-tiny")
    batches = bert_pretraining_batches(spec, 64, 2, seed=1)
    pairs = {}
    for (ids, types, _), (mlm, _) in batches:
        orig = np.where(mlm != -100, mlm, ids)
        for row, t in zip(orig, types):
            seq = [int(w) for w in row[1 : np.argmax(t) - 1]] if t.any() else []
            for a, b in zip(seq, seq[1:]):
                pairs.setdefault(a, set()).add(b)
    # A word has at most BRANCH successors inside segments: the chain is learnable.
    assert max(len(v) for v in pairs.values()) <= BRANCH


def test_training_uses_the_learnable_generator():
    """``dlbench train`` draws BERT batches from ``models.synthetic.batches``: it must
    be the chain generator above (the one whose loss is shown to fall)."""
    from dlbench.models.synthetic import batches

    spec = get_model("bert-tiny")
    got = batches(spec, 4, 2, seed=3)
    want = bert_pretraining_batches(spec, 4, 2, seed=3)
    for (gi, gl), (wi, wl) in zip(got, want, strict=True):
        for a, b in zip((*gi, *gl), (*wi, *wl), strict=True):
            np.testing.assert_array_equal(a, b)
