"""Synthetic parallel text that a translation model can learn, made before the clock.

Each source sentence is a random run of word ids (from ``ACTIVE_WORDS`` of them)
of random length (at least half the source length), padded with 0; its
translation is the same sentence word by word through one fixed random
dictionary (a permutation of the word ids), then the end-of-sentence id.  The
target is a function of the source, aligned monotonically, so a decoder with
attention can learn it exactly; its loss falls from ln(vocab) within a few steps
(first the target's word distribution, then the alignment).  Batches are
``((src, tgt_in), tgt_out)``: ``tgt_in`` is the beginning-of-sentence id followed
by ``tgt_out`` shifted right (teacher forcing).
"""

from __future__ import annotations

import numpy as np

from dlbench.core.errors import UserError
from dlbench.models.gnmt import BOS_ID, EOS_ID, PAD_ID
from dlbench.models.registry import ModelSpec

FIRST_WORD = 4  # ids below are padding, unknown, BOS and EOS
# Source words come from this many ids at most (as models.synthetic's active classes):
# the target's few words are learnt within a few steps, and the loss shows it.
ACTIVE_WORDS = 16


def teacher_inputs(tgt_out: np.ndarray) -> np.ndarray:
    """``tgt_in`` for ``tgt_out`` (batch, steps): BOS, then the target shifted right;
    padding stays padding."""
    tgt_in = np.full_like(tgt_out, PAD_ID)
    tgt_in[:, 0] = BOS_ID
    tgt_in[:, 1:] = tgt_out[:, :-1]
    return tgt_in


def seq2seq_batches(spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0):
    cfg = spec.config
    if cfg["decoder"] != "teacher":
        raise UserError(
            f"{spec.name} decodes greedily and does not train: train the "
            f"teacher-forced model and load its checkpoint with --model {spec.name}"
        )
    vocab, src_len, tgt_len = cfg["vocab_size"], cfg["src_len"], cfg["tgt_len"]
    if vocab - FIRST_WORD < 2:
        raise ValueError(f"{spec.name}: vocabulary {vocab} is too small")
    rng = np.random.default_rng(seed)
    dictionary = np.arange(vocab)
    dictionary[FIRST_WORD:] = FIRST_WORD + rng.permutation(vocab - FIRST_WORD)
    words_used = FIRST_WORD + rng.permutation(vocab - FIRST_WORD)[:ACTIVE_WORDS]
    longest = min(src_len, tgt_len - 1)
    out = []
    for _ in range(n_batches):
        lengths = rng.integers(max(1, longest // 2), longest + 1, size=batch_size)
        positions = np.arange(src_len)[None]
        words = rng.choice(words_used, size=(batch_size, src_len))
        src = np.where(positions < lengths[:, None], words, PAD_ID)
        tgt_out = np.full((batch_size, tgt_len), PAD_ID, dtype=np.int64)
        tgt_out[:, :src_len] = np.where(src == PAD_ID, PAD_ID, dictionary[src])[:, :tgt_len]
        tgt_out[np.arange(batch_size), lengths] = EOS_ID
        out.append(
            ((src.astype(np.int32), teacher_inputs(tgt_out).astype(np.int32)), tgt_out.astype(np.int32))
        )
    return out
