"""The Large Movie Review Dataset (aclImdb): sentiment from raw review text.

Layout: ``ROOT/train/{pos,neg}/*.txt`` and ``ROOT/test/{pos,neg}/*.txt``
(``unsup/`` and the ``.feat`` files are ignored).  Labels: pos = 1, neg = 0.
Before the clock, every training review is read and tokenized once to build
the vocabulary (``harness.data.tokenizer``; size = the model's embedding size,
``int_range`` of its token input).  Per step, the batch's files are read
again, tokenized, mapped to ids and truncated or padded at the end to the
model's sequence length, as a streaming text loader does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, Dataset, check_batch, epoch_indices, ordered_indices, token_input
from dlbench.harness.data.tokenizer import Vocabulary, pad_ids, tokenize
from dlbench.models.registry import ModelSpec

LABELS = {"neg": 0, "pos": 1}


def looks_like(path: Path) -> bool:
    return all((path / "train" / c).is_dir() for c in LABELS)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


class AclImdb(Dataset):
    format = "aclimdb"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        source = self.describe_source()
        self.seq_len, self.vocab_size = token_input(spec, source)
        self.check_classes(source, len(LABELS))
        if not looks_like(path):
            raise UserError(f"{source}: want ROOT/train/pos/*.txt and ROOT/train/neg/*.txt")
        self.eval_split = "test" if all((path / "test" / c).is_dir() for c in LABELS) else None
        self.files: dict[str, list[tuple[Path, int]]] = {}
        self.vocab: Vocabulary | None = None

    def no_eval_reason(self) -> str:
        return "no ROOT/test/pos and ROOT/test/neg"

    def _index(self, split: str) -> list[tuple[Path, int]]:
        items = [
            (f, y) for c, y in sorted(LABELS.items()) for f in sorted((self.path / split / c).glob("*.txt"))
        ]
        if not items:
            raise UserError(f"{self.describe_source()}: no .txt reviews under {self.path / split}")
        return items

    def prepare(self) -> None:
        self.files["train"] = self._index("train")
        if self.eval_split:
            self.files["test"] = self._index("test")
        self.vocab = Vocabulary.build((tokenize(_read(f)) for f, _ in self.files["train"]), self.vocab_size)

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.files.items()}

    def describe(self) -> dict:
        return {
            **super().describe(),
            "vocabulary": len(self.vocab) if self.vocab else None,
            "sequence_length": self.seq_len,
            "tokenizer": "dlbench.harness.data.tokenizer",
        }

    def _batch(self, items) -> Batch:
        ids = [self.vocab.encode(tokenize(_read(f))) for f, _ in items]
        return (
            pad_ids(ids, self.seq_len).astype(self.spec.inputs[0].dtype),
            np.array([y for _, y in items], np.int32),
        )

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if self.vocab is None:
            self.prepare()
        items = self.files["train"]
        check_batch(self, batch_size, len(items))
        for idx in epoch_indices(len(items), batch_size, np.random.default_rng(seed)):
            yield self._batch([items[i] for i in idx])

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        if self.vocab is None:
            self.prepare()
        items = self.files["test"]
        # Interleave pos and neg so that a --eval-samples prefix holds both classes.
        order = np.argsort(_interleave([y for _, y in items]), kind="stable")
        items = [items[i] for i in order]
        for idx in ordered_indices(len(items), batch_size, limit):
            yield self._batch([items[i] for i in idx])


def _interleave(labels: list[int]) -> np.ndarray:
    """Rank of each item within its class: sorting by it alternates the classes."""
    rank = np.zeros(len(labels), np.int64)
    seen: dict[int, int] = {}
    for i, y in enumerate(labels):
        rank[i] = seen.get(y, 0)
        seen[y] = rank[i] + 1
    return rank
