"""Synthetic click logs that DIN can learn, and that only an attention over the
behaviour sequence learns well.

Every item belongs to one category (a fixed map, the same for every seed, so
a held-out split drawn with another seed follows the same rule).  A user's
history holds a few "interest" categories' items, of a random length (the
rest is padding, id 0); the candidate is clicked exactly when its category is
one of the history's.  Half the candidates are drawn from the history's
categories and half from outside them, so the labels are balanced and a model
ignoring the history stays at AUC 0.5, while one whose attention weights
matching behaviours climbs well above it in a few dozen steps.

Batch layout, shared with the real reader (``harness.data.ctr``):
``((hist_items, hist_cats, item, category), clicks)``, all int32; the history
arrays (batch, seq_len), the candidate arrays (batch, 1), clicks (batch,) 0/1.
"""

from __future__ import annotations

import numpy as np

from dlbench.models.din import PAD_ID
from dlbench.models.registry import ModelSpec

INTERESTS = (1, 3)  # a user's history spans 1 to 3 categories
MIN_FILL = 0.25  # at least a quarter of the sequence is real behaviours


def category_of(items: np.ndarray, categories: int) -> np.ndarray:
    """The fixed item -> category map (1 .. categories-1; padding stays 0)."""
    items = np.asarray(items, np.int64)
    return np.where(items == PAD_ID, PAD_ID, 1 + (items * 7919) % (categories - 1))


def ctr_batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0
) -> list[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    cfg = spec.config
    seq, n_items, n_cats = cfg["seq_len"], cfg["items"], cfg["categories"]
    if n_cats < 5:
        raise ValueError(f"{spec.name}: {n_cats} categories; the synthetic task needs 5")
    rng = np.random.default_rng(seed)
    # Items of each category (every real category has some, since 7919 is prime).
    everything = np.arange(1, n_items)
    by_cat = {c: everything[category_of(everything, n_cats) == c] for c in range(1, n_cats)}
    by_cat = {c: v for c, v in by_cat.items() if len(v)}
    cats = np.array(sorted(by_cat))
    out = []
    for _ in range(n_batches):
        hist = np.zeros((batch_size, seq), np.int32)
        cand = np.zeros((batch_size, 1), np.int32)
        clicks = rng.integers(0, 2, batch_size).astype(np.int32)
        for b in range(batch_size):
            mine = rng.choice(cats, size=rng.integers(INTERESTS[0], INTERESTS[1] + 1), replace=False)
            length = rng.integers(max(1, int(MIN_FILL * seq)), seq + 1)
            picks = rng.choice(mine, size=length)
            hist[b, :length] = [rng.choice(by_cat[c]) for c in picks]
            mine = np.unique(picks)  # the categories the history really holds
            pool = mine if clicks[b] else np.setdiff1d(cats, mine)
            cand[b, 0] = rng.choice(by_cat[int(rng.choice(pool))])
        inputs = (
            hist,
            category_of(hist, n_cats).astype(np.int32),
            cand,
            category_of(cand, n_cats).astype(np.int32),
        )
        out.append((inputs, clicks))
    return out
