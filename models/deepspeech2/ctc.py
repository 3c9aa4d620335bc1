"""CTC on the host, in numpy: text <-> ids, greedy decoding, edit distance and the loss.

Decoding stays outside the exported graph (it is a data-dependent loop over
frames with variable-length output, which ONNX and the frameworks' static
graphs would only express awkwardly): the graph ends at per-frame logits,
and these functions turn them into text and into the held-out score.  The
numpy loss is the same quantity the frameworks minimize (``-log p(transcript)``
per utterance), so ``dlbench eval`` on an ONNX file reports a loss comparable
with training's.
"""

from __future__ import annotations

import numpy as np

from dlbench.models.deepspeech2 import ALPHABET, BLANK

_INDEX = {c: i for i, c in enumerate(ALPHABET) if i != BLANK}


def normalize(text: str) -> str:
    """LibriSpeech's upper-case transcripts in the alphabet: lower case, runs of
    whitespace as one space; characters outside the alphabet are dropped."""
    text = " ".join(text.lower().split())
    return "".join(c for c in text if c in _INDEX)


def encode(text: str) -> list[int]:
    return [_INDEX[c] for c in normalize(text)]


def decode(ids) -> str:
    return "".join(ALPHABET[int(i)] for i in ids if int(i) != BLANK)


def greedy(logits: np.ndarray, length: int | None = None) -> list[int]:
    """Best path: the arg-max class per frame, repeats merged, blanks dropped."""
    best = np.asarray(logits)[:length].argmax(axis=-1)
    keep = np.ones(len(best), bool)
    keep[1:] = best[1:] != best[:-1]
    return [int(c) for c in best[keep] if c != BLANK]


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences (one row of the table at a time)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def _logsumexp(*xs: np.ndarray) -> np.ndarray:
    top = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):  # every path -inf: log(0) = -inf, as meant
        return safe + np.log(sum(np.exp(x - safe) for x in xs))


def nll(logits: np.ndarray, target, length: int) -> float:
    """-log p(target | logits[:length]) under CTC (the forward algorithm, float64)."""
    z = np.asarray(logits, np.float64)[:length]
    top = z.max(axis=1, keepdims=True)
    logp = z - (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))
    ext = np.full(2 * len(target) + 1, BLANK, np.int64)
    ext[1::2] = np.asarray(target, np.int64)
    # A state may skip the blank before it when its label differs from the one two back.
    skip = np.zeros(len(ext), bool)
    skip[2:] = (ext[2:] != BLANK) & (ext[2:] != ext[:-2])
    alpha = np.full(len(ext), -np.inf)
    alpha[0] = logp[0, ext[0]]
    if len(ext) > 1:
        alpha[1] = logp[0, ext[1]]
    for t in range(1, len(z)):
        one = np.concatenate(([-np.inf], alpha[:-1]))
        two = np.where(skip, np.concatenate(([-np.inf, -np.inf], alpha[:-2])), -np.inf)
        alpha = _logsumexp(alpha, one, two) + logp[t, ext]
    return float(-_logsumexp(alpha[-1:], alpha[-2:-1] if len(ext) > 1 else alpha[-1:])[0])
