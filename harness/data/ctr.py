"""Click logs with user-behaviour sequences, in the text format of DIN's Amazon data.

The format is the one the DIN authors' follow-up code (DIEN, ``mouna99/dien``)
trains DIN on: ``local_train_splitByUser`` and ``local_test_splitByUser``, one
sample per line, six tab-separated fields::

    label \\t user \\t item \\t category \\t hist_items \\t hist_cats

``label`` 1 (click) or 0; ``item``/``category`` the candidate's raw ids (ASINs
and category names in the Amazon files, any strings); ``hist_items`` and
``hist_cats`` the behaviour sequence, oldest first, items separated by ``\\x02``
(control-B; not a comma, since Amazon category names hold commas).  ``user`` is
read and ignored (the model has no user embedding, ``models.din``).

``--data ctr:PATH`` with PATH a directory holding ``local_train_splitByUser``
(and, for ``--eval``, ``local_test_splitByUser``), or a single file (no
held-out split); a directory holding the training file is also detected.
Before the clock, the training file is read once and the id vocabularies built
by frequency (candidates and histories together, ties in first-seen order):
id 0 is padding, id 1 any value outside the model's table (``int_range``).
Per step, a batch's lines are mapped to ids; a history longer than the model's
``seq_len`` keeps its most recent part, a shorter one is padded with 0 at the
end (``models.din.data``'s layout).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, Dataset, check_batch, epoch_indices, ordered_indices
from dlbench.models.registry import ModelSpec

TRAIN_FILE = "local_train_splitByUser"
TEST_FILE = "local_test_splitByUser"
SEP = "\x02"
PAD, UNKNOWN = 0, 1
INPUTS = ("hist_items", "hist_cats", "item", "category")

Row = tuple[int, str, str, list[str], list[str]]  # label, item, category, histories


def looks_like(path: Path) -> bool:
    return path.is_dir() and (path / TRAIN_FILE).is_file()


def read_rows(path: Path) -> list[Row]:
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 6 or fields[0].strip() not in ("0", "1"):
                raise UserError(
                    f"{path}:{n}: want 6 tab-separated fields 'label user item "
                    f"category hist_items hist_cats' with label 0 or 1"
                )
            items = fields[4].split(SEP) if fields[4] else []
            cats = fields[5].split(SEP) if fields[5] else []
            if len(items) != len(cats):
                raise UserError(f"{path}:{n}: {len(items)} history items but {len(cats)} history categories")
            rows.append((int(fields[0]), fields[2], fields[3], items, cats))
    if not rows:
        raise UserError(f"{path}: no samples")
    return rows


def vocabulary(values: Iterator[str], size: int) -> dict[str, int]:
    """Value -> id for the ``size - 2`` most frequent values (ids from 2)."""
    counts = Counter(values)
    order = sorted(counts, key=lambda v: -counts[v])  # stable: first-seen among ties
    return {v: i + 2 for i, v in enumerate(order[: max(0, size - 2)])}


class ClickLog(Dataset):
    format = "ctr"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        names = tuple(i.name for i in spec.inputs)
        if names != INPUTS:
            raise UserError(
                f"{self.describe_source()}: click logs, but {spec.name} takes "
                f"{', '.join(names)} (want {', '.join(INPUTS)})"
            )
        self.check_classes(self.describe_source(), 2)
        if path.is_dir():
            if not looks_like(path):
                raise UserError(f"{self.describe_source()}: no {TRAIN_FILE} in it")
            self.files = {"train": path / TRAIN_FILE}
            if (path / TEST_FILE).is_file():
                self.files["test"] = path / TEST_FILE
        else:
            self.files = {"train": path}
        self.eval_split = "test" if "test" in self.files else None
        self.seq_len = spec.inputs[0].shape[0]
        self.rows: dict[str, list[Row]] = {}
        self.vocab: tuple[dict[str, int], dict[str, int]] | None = None

    def no_eval_reason(self) -> str:
        return f"no {TEST_FILE} beside the training file"

    def prepare(self) -> None:
        self.rows = {split: read_rows(f) for split, f in self.files.items()}
        train = self.rows["train"]
        items = vocabulary((v for r in train for v in (r[1], *r[3])), self.spec.inputs[0].int_range[1])
        cats = vocabulary((v for r in train for v in (r[2], *r[4])), self.spec.inputs[1].int_range[1])
        self.vocab = (items, cats)

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.rows.items()}

    def describe(self) -> dict:
        return {
            **super().describe(),
            "sequence_length": self.seq_len,
            "items": len(self.vocab[0]) if self.vocab else None,
            "categories": len(self.vocab[1]) if self.vocab else None,
        }

    def batch(self, rows: list[Row]) -> Batch:
        items, cats = self.vocab
        n, seq = len(rows), self.seq_len
        hist_items, hist_cats = np.zeros((n, seq), np.int32), np.zeros((n, seq), np.int32)
        item, category = np.zeros((n, 1), np.int32), np.zeros((n, 1), np.int32)
        for b, (_, it, ca, his, hcs) in enumerate(rows):
            his, hcs = his[-seq:], hcs[-seq:]  # the most recent behaviours
            hist_items[b, : len(his)] = [items.get(v, UNKNOWN) for v in his]
            hist_cats[b, : len(hcs)] = [cats.get(v, UNKNOWN) for v in hcs]
            item[b, 0], category[b, 0] = items.get(it, UNKNOWN), cats.get(ca, UNKNOWN)
        labels = np.array([r[0] for r in rows], np.int32)
        return (hist_items, hist_cats, item, category), labels

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if self.vocab is None:
            self.prepare()
        rows = self.rows["train"]
        check_batch(self, batch_size, len(rows))
        for idx in epoch_indices(len(rows), batch_size, np.random.default_rng(seed)):
            yield self.batch([rows[i] for i in idx])

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        if self.vocab is None:
            self.prepare()
        rows = self.rows["test"]
        for idx in ordered_indices(len(rows), batch_size, limit):
            yield self.batch([rows[i] for i in idx])
