"""A plain-text corpus for BERT pre-training: masked-language-model + next-sentence pairs.

Input: a UTF-8 ``.txt`` file, one sentence per line, a blank line between
documents (the layout of BERT's ``create_pretraining_data.py``).  Before the
clock the file is read, tokenized (``harness.data.tokenizer``) and the
vocabulary built from the training documents, with the special tokens
``[PAD]`` = 0, ``[UNK]`` = 1, ``[CLS]`` = 2, ``[SEP]`` = 3, ``[MASK]`` = 4.
With four documents or more, the last max(2, N/10) documents are held out as
the ``heldout`` split (always, so training data does not depend on ``--eval``).

Per step, each example is built afresh (this is the reader's per-step work):
  * a sentence A and, with probability 1/2, the sentence that follows it in its
    document (``nsp_labels`` 0, "is next") or else a random sentence of another
    document (``nsp_labels`` 1, "random") -- the convention of BERT's
    ``next_sentence_label``;
  * ``[CLS] A [SEP] B [SEP]``, the longer of A and B cut at its end until it
    fits the model's sequence length, then ``[PAD]`` to that length;
  * masking: each word token (never ``[CLS]``/``[SEP]``/``[PAD]``) is chosen with
    probability 0.15 (at least one per row, so no batch lacks a masked-LM target);
    a chosen token becomes ``[MASK]`` 80 % of the time, a random word 10 %, stays
    itself 10 %.

Batch layout (all int32, B = batch size, T = sequence length):
  inputs = {"input_ids": (B, T), "token_type_ids": (B, T) 0 for [CLS] A [SEP] and
            padding, 1 for B [SEP], "attention_mask": (B, T) 1 on real tokens}
  labels = {"mlm_labels": (B, T) the original id where a token was chosen, -100
            elsewhere (ignored by the loss), "nsp_labels": (B,)}
``pretraining_dict`` merges the two into one dict with those five keys.  The
names are BERT's input names, so ``harness.training.objectives.inputs_of`` and
``labels_of`` put them in ``spec.inputs`` / label order; the special ids match
``models.synthetic``'s token data.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, Dataset, token_input
from dlbench.harness.data.tokenizer import PAD, Vocabulary, tokenize
from dlbench.models.registry import ModelSpec

CLS, SEP, MASK = "[CLS]", "[SEP]", "[MASK]"
SPECIALS = (CLS, SEP, MASK)
MASK_PROB, MASK_TOKEN, RANDOM_TOKEN = 0.15, 0.8, 0.1
IGNORE = -100
EVAL_SEED = 20240918  # fixed: every run evaluates the same pairs and masks


def looks_like(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".txt"


def read_documents(path: Path) -> list[list[list[str]]]:
    """Documents as lists of tokenized sentences; empty sentences and documents dropped."""
    docs: list[list[list[str]]] = [[]]
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                if docs[-1]:
                    docs.append([])
                continue
            tokens = tokenize(line)
            if tokens:
                docs[-1].append(tokens)
    return [d for d in docs if d]


def pretraining_dict(batch: Batch) -> dict[str, np.ndarray]:
    inputs, labels = batch
    return {**inputs, **labels}


class TextCorpus(Dataset):
    format = "text"
    eval_known_late = True

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        source = self.describe_source()
        self.seq_len, self.vocab_size = token_input(spec, source)
        if self.seq_len < 5:
            raise UserError(f"{source}: sequence length {self.seq_len} cannot hold [CLS] A [SEP] B [SEP]")
        if self.vocab_size <= 1 + len(SPECIALS) + 1:
            raise UserError(
                f"{source}: {spec.name}'s vocabulary of {self.vocab_size} cannot "
                f"hold {PAD}, [UNK], {', '.join(SPECIALS)} and any word"
            )
        if not path.is_file():
            raise UserError(f"{source}: no such file")
        self.docs: dict[str, list[list[list[int]]]] = {}
        self.vocab: Vocabulary | None = None

    def prepare(self) -> None:
        docs = read_documents(self.path)
        held = max(2, len(docs) // 10) if len(docs) >= 4 else 0
        train, heldout = docs[: len(docs) - held], docs[len(docs) - held :]
        if len(train) < 2 or not any(len(d) >= 2 for d in train):
            raise UserError(
                f"{self.describe_source()}: next-sentence pairs need at least two "
                "documents (blank-line separated) and one with two sentences; "
                f"found {len(docs)} documents"
            )
        self.vocab = Vocabulary.build((t for d in train for t in d), self.vocab_size, SPECIALS)
        enc = lambda ds: [[self.vocab.encode(s) for s in d] for d in ds]  # noqa: E731 - a one-line helper used right here
        self.docs = {"train": enc(train)}
        if held and any(len(d) >= 2 for d in heldout):
            self.docs["heldout"] = enc(heldout)
            self.eval_split = "heldout"

    def require_eval(self) -> None:
        if self.vocab is None:
            self.prepare()
        super().require_eval()

    def no_eval_reason(self) -> str:
        return "fewer than four documents, so none is held out"

    def split_sizes(self) -> dict[str, int]:
        """Sentence pairs with a true next sentence, per split."""
        return {k: sum(len(d) - 1 for d in v) for k, v in self.docs.items()}

    def describe(self) -> dict:
        return {
            **super().describe(),
            "vocabulary": len(self.vocab) if self.vocab else None,
            "sequence_length": self.seq_len,
            "documents": {k: len(v) for k, v in self.docs.items()},
            "tokenizer": "dlbench.harness.data.tokenizer",
            "mask_prob": MASK_PROB,
        }

    # -- building examples -------------------------------------------------
    def _pair(self, docs, d: int, i: int, rng) -> tuple[list[int], list[int], int]:
        a = docs[d][i]
        if rng.random() < 0.5:
            return a, docs[d][i + 1], 0
        other = int(rng.integers(0, len(docs) - 1))
        other += other >= d  # any document but d
        return a, docs[other][int(rng.integers(0, len(docs[other])))], 1

    def _encode(self, pairs, rng) -> Batch:
        ids = self.vocab.ids
        cls, sep, mask = ids[CLS], ids[SEP], ids[MASK]
        first_word, n_vocab = 1 + len(SPECIALS) + 1, len(self.vocab)
        b, t = len(pairs), self.seq_len
        input_ids = np.zeros((b, t), np.int32)
        token_type = np.zeros((b, t), np.int32)
        words = np.zeros((b, t), bool)
        for k, (a, bb, _) in enumerate(pairs):
            a, bb = list(a), list(bb)
            while len(a) + len(bb) > t - 3:
                (a if len(a) >= len(bb) else bb).pop()
            seq = [cls, *a, sep, *bb, sep]
            input_ids[k, : len(seq)] = seq
            token_type[k, len(a) + 2 : len(seq)] = 1
            words[k, 1 : 1 + len(a)] = True
            words[k, len(a) + 2 : len(a) + 2 + len(bb)] = True
        attention = (input_ids != ids[PAD]).astype(np.int32)  # before masking
        chosen = words & (rng.random((b, t)) < MASK_PROB)
        for k in np.flatnonzero(~chosen.any(axis=1) & words.any(axis=1)):
            chosen[k, rng.choice(np.flatnonzero(words[k]))] = True  # >= 1 per row
        mlm_labels = np.where(chosen, input_ids, IGNORE).astype(np.int32)
        roll = rng.random((b, t))
        masked = input_ids.copy()
        masked[chosen & (roll < MASK_TOKEN)] = mask
        swap = chosen & (roll >= MASK_TOKEN) & (roll < MASK_TOKEN + RANDOM_TOKEN)
        if n_vocab > first_word:
            masked[swap] = rng.integers(first_word, n_vocab, int(swap.sum()))
        inputs = {"input_ids": masked, "token_type_ids": token_type, "attention_mask": attention}
        labels = {"mlm_labels": mlm_labels, "nsp_labels": np.array([p[2] for p in pairs], np.int32)}
        return inputs, labels

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if self.vocab is None:
            self.prepare()
        docs = self.docs["train"]
        starts = [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)]
        rng = np.random.default_rng(seed)
        while True:
            picks = rng.integers(0, len(starts), batch_size)
            yield self._encode([self._pair(docs, *starts[p], rng) for p in picks], rng)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        docs = self.docs["heldout"]
        starts = [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)]
        starts = starts[:limit] if limit is not None else starts
        rng = np.random.default_rng(EVAL_SEED)
        for s in range(0, len(starts), batch_size):
            yield self._encode([self._pair(docs, d, i, rng) for d, i in starts[s : s + batch_size]], rng)
