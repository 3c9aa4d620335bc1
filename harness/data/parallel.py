"""Parallel text for translation (``seq2seq`` models such as GNMT).

Input: the training source file, ``--data parallel:DIR/train.en`` (or just the
path: a file named ``train.XX`` with exactly one ``train.YY`` beside it is
detected).  The other ``train.*`` file in its folder is the target; the two are
line-aligned, one UTF-8 sentence per line (the layout of WMT's prepared
``train.en`` / ``train.de``).  A pair of ``valid.*``, ``dev.*`` or ``test.*``
files with the same two suffixes (the first found, in that order) is the held-out
split.  A line pair with an empty side is skipped.

Before the clock, every line is tokenized (``harness.data.tokenizer``) and ONE
vocabulary is built from both training files (GNMT shares it): ``[PAD]`` = 0,
``[UNK]`` = 1, ``<s>`` = 2, ``</s>`` = 3 (``models.gnmt``'s ids), then words by
frequency up to the model's vocabulary size.  Per step, a batch of pairs is
encoded: ``src`` the source ids cut to the model's source length and padded;
labels ``tgt_out`` the target ids cut to leave room for ``</s>``, then ``</s>``,
padded; ``tgt_in`` is ``<s>`` followed by ``tgt_out`` shifted right (teacher
forcing).  Inputs come as a dict by input name, labels as one int32 array.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, Dataset, check_batch, epoch_indices, ordered_indices
from dlbench.harness.data.tokenizer import Vocabulary, pad_ids, tokenize
from dlbench.models.registry import ModelSpec

BOS, EOS = "<s>", "</s>"
HELDOUT_PREFIXES = ("valid", "dev", "test")
INPUTS = ("src", "tgt_in")


def _partners(path: Path) -> list[Path]:
    return sorted(
        p
        for p in path.parent.glob("train.*")
        if p != path and p.is_file() and p.suffix and p.suffix != path.suffix
    )


def looks_like(path: Path) -> bool:
    return path.is_file() and path.stem == "train" and len(_partners(path)) == 1


def read_lines(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [tokenize(line) for line in f]


class ParallelText(Dataset):
    format = "parallel"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        source = self.describe_source()
        names = tuple(i.name for i in spec.inputs)
        if spec.objective != "seq2seq" or names != INPUTS:
            raise UserError(
                f"{source}: parallel text trains a translation model (inputs "
                f"src, tgt_in); {spec.name} takes {', '.join(names)}"
            )
        self.src_len, self.tgt_len = (i.shape[0] for i in spec.inputs)
        self.vocab_size = spec.inputs[0].int_range[1]
        if not path.is_file() or path.stem != "train":
            raise UserError(f"{source}: give the training source file, e.g. DIR/train.en")
        partners = _partners(path)
        if len(partners) != 1:
            raise UserError(
                f"{source}: need exactly one other train.* file beside it (the target), found {len(partners)}"
            )
        self.target = partners[0]
        self.heldout: tuple[Path, Path] | None = None
        for prefix in HELDOUT_PREFIXES:
            pair = (path.with_name(prefix + path.suffix), path.with_name(prefix + self.target.suffix))
            if all(p.is_file() for p in pair):
                self.heldout = pair
                self.eval_split = "heldout"
                break
        self.vocab: Vocabulary | None = None
        self.pairs: dict[str, tuple[list[list[int]], list[list[int]]]] = {}

    def _read(self, src: Path, tgt: Path) -> tuple[list[list[str]], list[list[str]]]:
        a, b = read_lines(src), read_lines(tgt)
        if len(a) != len(b):
            raise UserError(
                f"{self.describe_source()}: {src.name} has {len(a)} lines, "
                f"{tgt.name} {len(b)}: the files must be line-aligned"
            )
        keep = [i for i in range(len(a)) if a[i] and b[i]]
        return [a[i] for i in keep], [b[i] for i in keep]

    def prepare(self) -> None:
        train = self._read(self.path, self.target)
        self.vocab = Vocabulary.build((*train[0], *train[1]), self.vocab_size, (BOS, EOS))
        splits = {"train": train}
        if self.heldout:
            splits["heldout"] = self._read(*self.heldout)
        self.pairs = {
            k: ([self.vocab.encode(s) for s in a], [self.vocab.encode(s) for s in b])
            for k, (a, b) in splits.items()
        }

    def split_sizes(self) -> dict[str, int]:
        """Line pairs per split (known once ``prepare`` has read them)."""
        return {k: len(a) for k, (a, _) in self.pairs.items()}

    def no_eval_reason(self) -> str:
        return f"no valid.*, dev.* or test.* pair beside {self.path.name}"

    def describe(self) -> dict:
        return {
            **super().describe(),
            "target": str(self.target),
            "heldout": [str(p) for p in self.heldout] if self.heldout else None,
            "vocabulary": len(self.vocab) if self.vocab else None,
            "tokenizer": "dlbench.harness.data.tokenizer",
        }

    def _encode(self, split: str, rows: np.ndarray) -> Batch:
        from dlbench.models.gnmt.data import teacher_inputs

        srcs, tgts = self.pairs[split]
        eos = self.vocab.ids[EOS]
        src = pad_ids([srcs[i] for i in rows], self.src_len)
        tgt_out = pad_ids([tgts[i][: self.tgt_len - 1] + [eos] for i in rows], self.tgt_len)
        return {"src": src, "tgt_in": teacher_inputs(tgt_out)}, tgt_out

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if self.vocab is None:
            self.prepare()
        n = len(self.pairs["train"][0])
        check_batch(self, batch_size, n)
        for rows in epoch_indices(n, batch_size, np.random.default_rng(seed)):
            yield self._encode("train", rows)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        if self.vocab is None:
            self.prepare()
        for rows in ordered_indices(len(self.pairs["heldout"][0]), batch_size, limit):
            yield self._encode("heldout", rows)
