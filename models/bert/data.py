"""Synthetic BERT pre-training batches that a correct training step can learn from.

Random token ids give a masked-LM loss that cannot fall below ln(vocab), so a
broken step would look like a working one.  Here the "corpus" is a Markov
chain over the vocabulary in which every token has only ``BRANCH`` possible
successors: a masked token is predictable from its left neighbour, and whether
segment B continues segment A (next-sentence prediction) is visible at the
boundary.  The loss of a working training loop therefore falls within a few
steps, in every framework.  One seed drives everything; the same seed gives the
same bytes.

Layout of one batch, shared by every BERT source (synthetic or a real corpus):
``((input_ids, token_type_ids, attention_mask), (mlm_labels, nsp_labels))``
(what ``models.synthetic.batches`` gives the "bert-pretraining" objective),
all int32; inputs and ``mlm_labels`` are (batch, seq_len), ``nsp_labels``
(batch,).  A row is ``[CLS] A [SEP] B [SEP] [PAD]...``; token type 0 for
``[CLS] A [SEP]``, 1 for ``B [SEP]``, 0 on padding; ``attention_mask`` 1 on
real tokens.  ``mlm_labels`` holds the original id at the masked positions and
-100 everywhere else (at least one masked position per row); ``nsp_labels`` is
0 when B continues A and 1 when B is unrelated (Hugging Face's convention).
Special ids are ``models.synthetic``'s (and ``harness.data``'s vocabulary's):
[PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4.  Masking follows BERT: 15% of
the ordinary tokens, of which 80% become ``[MASK]``, 10% a random token and
10% stay.
"""

from __future__ import annotations

import numpy as np

from dlbench.models.bert import IGNORE_INDEX
from dlbench.models.registry import ModelSpec
from dlbench.models.synthetic import specials

BRANCH = 2  # successors per token in the synthetic chain
ZIPF = 1.1  # word frequencies fall off like natural language's
MASK_RATE = 0.15

Batch = tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _chain(rng, successors: np.ndarray, start: int, length: int) -> np.ndarray:
    out = np.empty(length, np.int32)
    token = start
    for i in range(length):
        token = successors[token, rng.integers(BRANCH)]
        out[i] = token
    return out


def _mask_row(rng, ids: np.ndarray, words: np.ndarray, first: int, vocab: int, mask_id: int) -> np.ndarray:
    """Mask ``words`` positions of ``ids`` in place; return the row's MLM labels."""
    labels = np.full(ids.shape, IGNORE_INDEX, np.int32)
    n = max(1, int(round(MASK_RATE * len(words))))
    chosen = rng.choice(words, size=n, replace=False)
    labels[chosen] = ids[chosen]
    action = rng.random(n)
    ids[chosen[action < 0.8]] = mask_id
    swap = chosen[(action >= 0.8) & (action < 0.9)]
    ids[swap] = rng.integers(first, vocab, size=len(swap))
    return labels


def bert_pretraining_batches(spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0) -> list[Batch]:
    """``n_batches`` pre-training batches for ``spec`` (a BERT), in the layout above."""
    seq, vocab = spec.inputs[0].shape[0], spec.inputs[0].int_range[1]
    sp = specials(spec)
    first = max(sp.values()) + 1  # ids below are special tokens
    if seq < 8 or vocab <= first + BRANCH:
        raise ValueError(f"{spec.name}: sequence {seq} / vocabulary {vocab} too small")
    rng = np.random.default_rng(seed)
    # The chain is a property of the "language", fixed by the seed like the
    # image classes' patterns; every batch samples new text from it.  Successors
    # are drawn with Zipf frequencies: the first thing a network learns is the
    # word distribution (the MLM loss drops from ln(vocab) towards its entropy
    # within a few steps), then the chain.
    rank = np.arange(1, vocab - first + 1, dtype=np.float64)
    freq = rank**-ZIPF
    words = rng.permutation(np.arange(first, vocab))
    successors = rng.choice(words, size=(vocab, BRANCH), p=freq / freq.sum())
    out = []
    for _ in range(n_batches):
        ids = np.full((batch_size, seq), sp["pad_id"], np.int32)
        types = np.zeros((batch_size, seq), np.int32)
        mask = np.zeros((batch_size, seq), np.int32)
        mlm = np.full((batch_size, seq), IGNORE_INDEX, np.int32)
        nsp = rng.integers(0, 2, size=batch_size).astype(np.int32)
        for r in range(batch_size):
            length = int(rng.integers(seq // 2, seq + 1))  # real tokens in the row
            words = length - 3  # minus CLS and two SEPs
            len_a = int(rng.integers(1, words))
            a = _chain(rng, successors, int(rng.integers(first, vocab)), len_a)
            start = a[-1] if nsp[r] == 0 else int(rng.integers(first, vocab))
            b = _chain(rng, successors, start, words - len_a)
            ids[r, :length] = np.concatenate(([sp["cls_id"]], a, [sp["sep_id"]], b, [sp["sep_id"]]))
            types[r, len_a + 2 : length] = 1
            mask[r, :length] = 1
            positions = np.concatenate((np.arange(1, len_a + 1), np.arange(len_a + 2, length - 1)))
            mlm[r] = _mask_row(rng, ids[r], positions, first, vocab, sp["mask_id"])
        out.append(((ids, types, mask), (mlm, nsp)))
    return out
