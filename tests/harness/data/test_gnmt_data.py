"""GNMT without a framework (core group): the walk's counts, the synthetic parallel
data, the seq2seq objective's tally, and the parallel-text reader on files written here."""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.data import open_dataset, parse
from dlbench.harness.evaluate.scoring import tally_for
from dlbench.harness.training.objectives import LABELS, LOSSES
from dlbench.models import synthetic
from dlbench.models.gnmt import BOS_ID, EOS_ID, PAD_ID, count_parameters, walk
from dlbench.models.gnmt.data import teacher_inputs
from dlbench.models.registry import get_model

MINI = get_model("gnmt-mini")


def test_gnmt_v2_counts_and_the_greedy_twin():
    h, v = 1024, 32_000
    lstm = lambda cin: 4 * h * (cin + h) + 4 * h  # noqa: E731 - one trainable bias
    expected = (
        v * h
        + 2 * lstm(h)
        + lstm(2 * h)
        + 2 * lstm(h)  # embedding, encoder
        + lstm(h)
        + 3 * lstm(2 * h)  # decoder
        + (h * h + h)
        + h * h
        + h  # attention q, k, v
        + h * v
        + v
    )  # classifier
    spec = get_model("gnmt")
    assert spec.parameter_count == expected == 159_978_752
    assert spec.macs_per_sample == 6_362_112_000
    greedy = get_model("gnmt-greedy")
    assert greedy.parameter_count == expected and [i.name for i in greedy.inputs] == ["src"]
    # Greedy decoding of as many steps as the teacher-forced target costs the same.
    assert greedy.macs_per_sample == spec.macs_per_sample
    layers = [op[1] for op in walk(spec.config) if op[0] == "lstm"]
    assert layers[:2] == ["encoder.0", "encoder.0.reverse"] and len(layers) == 9
    assert count_parameters({**MINI.config, "decode_len": 3, "decoder": "greedy"}) == MINI.parameter_count


def test_synthetic_pairs_are_learnable_and_teacher_forced():
    (((src, tgt_in), tgt_out),) = synthetic.batches(MINI, 8, 1, seed=0)
    assert src.dtype == tgt_in.dtype == tgt_out.dtype == np.int32
    assert src.shape == tgt_in.shape == tgt_out.shape == (8, 12)
    assert (tgt_in[:, 0] == BOS_ID).all() and (tgt_in[:, 1:] == tgt_out[:, :-1]).all()
    lengths = (src != PAD_ID).sum(1)
    assert (tgt_out[np.arange(8), lengths] == EOS_ID).all()
    assert ((tgt_out != PAD_ID).sum(1) == lengths + 1).all()
    # One fixed dictionary: the same source word always gives the same target word.
    again = synthetic.batches(MINI, 64, 2, seed=0)
    pairs = {
        (int(a), int(b))
        for (s, _), t in again
        for a, b in zip(s.ravel(), t.ravel())
        if a != PAD_ID and b not in (PAD_ID, EOS_ID)
    }
    assert len({a for a, _ in pairs}) == len(pairs) <= 16
    with pytest.raises(UserError, match="greedily"):
        synthetic.batches(get_model("gnmt-mini-greedy"), 2, 1)


def test_the_objective_is_registered_in_every_framework_and_its_tally_skips_padding():
    assert set(LOSSES["seq2seq"]) == {"pytorch", "tensorflow", "mindspore"}
    assert LABELS["seq2seq"] is None
    labels = np.array([[5, 6, 3, 0], [7, 3, 0, 0]])
    logits = np.zeros((2, 4, 8))
    logits[0, 0, 5] = logits[0, 1, 1] = logits[0, 2, 3] = logits[1, 0, 7] = 10.0
    logits[:, 3, 0] = logits[1, 2, 0] = 50.0  # padding "predicted" right: not counted
    tally = tally_for("seq2seq")
    tally.add((logits,), labels)
    r = tally.result()
    assert r["tokens"] == 5 and r["correct"] == 3 and r["accuracy"] == pytest.approx(0.6)
    assert r["samples"] == 2 and r["loss"] > 0


def _write_pair(d, prefix, en, de):
    (d / f"{prefix}.en").write_text("".join(s + "\n" for s in en), encoding="utf-8")
    (d / f"{prefix}.de").write_text("".join(s + "\n" for s in de), encoding="utf-8")


EN = [
    "the cat sat",
    "a dog ran far away over the long hill and back home again today",
    "",
    "the dog sat",
    "the cat ran",
]
DE = ["die katze sass", "ein hund lief", "leer", "der hund sass", "die katze lief"]


def test_parallel_text_is_detected_encoded_and_teacher_forced(tmp_path):
    _write_pair(tmp_path, "train", EN, DE)
    _write_pair(tmp_path, "valid", ["the cat"], ["die katze"])
    assert parse(str(tmp_path / "train.en")) == ("parallel", tmp_path / "train.en")
    ds = open_dataset(str(tmp_path / "train.en"), MINI)
    assert ds.target == tmp_path / "train.de" and ds.eval_split == "heldout"
    ds.prepare()
    assert ds.split_sizes() == {"train": 4, "heldout": 1}  # the empty line's pair skipped
    vocab = ds.vocab
    assert vocab.words[:4] == ["[PAD]", "[UNK]", "<s>", "</s>"]
    assert vocab.ids["</s>"] == EOS_ID and vocab.ids["<s>"] == BOS_ID
    assert "die" in vocab.ids and "the" in vocab.ids  # one shared vocabulary
    inputs, tgt_out = next(ds.train_batches(4, seed=0, layout="NCHW"))
    src, tgt_in = inputs["src"], inputs["tgt_in"]
    assert src.shape == tgt_out.shape == (4, 12) and src.dtype == np.int32
    assert (tgt_in == teacher_inputs(tgt_out)).all()
    long_row = int(np.flatnonzero((src != 0).sum(1) == 12)[0])  # cut to the source length
    assert (
        tgt_out[long_row].tolist()
        == [vocab.ids[w] for w in ("ein", "hund", "lief")] + [EOS_ID] + [PAD_ID] * 8
    )
    ((held, held_out),) = ds.eval_batches(8, "NCHW")
    assert held["src"][0, :2].tolist() == [vocab.ids["the"], vocab.ids["cat"]]
    assert held_out[0, :3].tolist() == [vocab.ids["die"], vocab.ids["katze"], EOS_ID]


def test_parallel_text_refusals(tmp_path):
    _write_pair(tmp_path, "train", EN, DE[:2])
    ds = open_dataset(f"parallel:{tmp_path / 'train.en'}", MINI)
    assert ds.eval_split is None
    with pytest.raises(UserError, match="line-aligned"):
        ds.prepare()
    with pytest.raises(UserError, match="translation model"):
        open_dataset(f"parallel:{tmp_path / 'train.en'}", get_model("lstm-tiny"))
    (tmp_path / "train.fr").write_text("x\n")
    with pytest.raises(UserError, match="exactly one other"):
        open_dataset(f"parallel:{tmp_path / 'train.en'}", MINI)


def test_eval_feeds_a_readers_named_inputs_in_the_models_order():
    from dlbench.harness.evaluate.child import _feeds

    src, tgt_in = np.zeros((2, 3), np.int32), np.ones((2, 3), np.int32)
    feeds = _feeds(["src", "tgt_in"], {"tgt_in": tgt_in, "src": src}, ["int32", "int32"])
    assert list(feeds) == ["src", "tgt_in"] and (feeds["tgt_in"] == 1).all()
