"""The one tokenizer and vocabulary the text readers share.

Tokenizer: lowercase, replace the HTML line breaks aclImdb reviews contain
(``<br />``) by spaces, and split on anything that is not a letter or a digit
(Unicode-aware; underscores split too).  "Don't" -> ["don", "t"].  Deliberately
simple: it is documented, framework-free and reproducible, not a subword model.

Vocabulary: special tokens first (``[PAD]`` = 0, ``[UNK]`` = 1, then any
others a reader asks for), then the most frequent words of the training split
(ties broken alphabetically, so the same text always gives the same ids) until
the model's embedding size is filled.  Words outside it map to ``[UNK]``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

PAD, UNK = "[PAD]", "[UNK]"
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(_BREAK.sub(" ", text).lower())


class Vocabulary:
    def __init__(self, words: Sequence[str]):
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.unk = self.ids[UNK]

    @classmethod
    def build(
        cls, token_lists: Iterable[Iterable[str]], size: int, specials: Sequence[str] = ()
    ) -> Vocabulary:
        """At most ``size`` entries: [PAD], [UNK], ``specials``, then words by frequency."""
        head = [PAD, UNK, *specials]
        if size <= len(head):
            raise ValueError(f"a vocabulary of {size} cannot hold the special tokens {head}")
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            counts.update(tokens)
        for s in head:
            counts.pop(s, None)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls(head + [w for w, _ in ranked[: size - len(head)]])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        get, unk = self.ids.get, self.unk
        return [get(t, unk) for t in tokens]


def pad_ids(sequences: Sequence[Sequence[int]], length: int, pad: int = 0) -> np.ndarray:
    """(N, length) int32: each sequence truncated to its first ``length`` ids, then
    padded at the end with ``pad``."""
    out = np.full((len(sequences), length), pad, np.int32)
    for i, seq in enumerate(sequences):
        seq = seq[:length]
        out[i, : len(seq)] = seq
    return out
