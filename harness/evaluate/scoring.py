"""Held-out loss and accuracy from a model's outputs, accumulated over batches.

Computed on the host in float64 from whatever the framework or backend
returned (float16 logits of an FP16 model included), so the figures of
different frameworks, backends and precisions differ only by what the models
computed, never by how the score was summed: ``dlbench train --eval`` and
``dlbench eval`` use the same tallies.  One tally per objective:

* classification: mean cross-entropy per sample (log-sum-exp minus the true
  class's logit) and the share of samples whose arg-max is the label;
* bert-pretraining: the training objective over the whole split (masked-LM
  cross-entropy per masked token + next-sentence cross-entropy per pair) and,
  as the accuracy, the masked-LM accuracy (share of masked tokens predicted),
  which is what BERT pre-training reports; next-sentence accuracy beside it;
* regression: mean squared error per output element, and no accuracy;
* ctr (click-through rate, DIN): the classification loss and accuracy of the
  two logits, and the ROC AUC of the click probability, which is what CTR work
  reports (a click model's accuracy mostly reflects the click rate).
* ctc (DeepSpeech2): mean CTC loss per utterance (the training objective,
  recomputed in numpy), and greedy decoding's character error rate (edit
  distance over reference characters); the accuracy is 1 - CER, floored at 0
  (a CER counts insertions, so it can pass 1).
* seq2seq (translation, teacher forced): cross-entropy per target token and token
  accuracy (arg-max equals the reference token), both over non-padding positions.
* detection (SSD) and instance-segmentation (Mask R-CNN): see
  ``harness.evaluate.detection``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlbench.harness.evaluate.detection import DetectionTally, InstanceSegmentationTally

# Objectives whose network output is a (batch, N) matrix of something other than class
# scores (Mask R-CNN's packed heads, a regression): no arg-max is read from it.
NOT_CLASS_SCORES = ("instance-segmentation", "regression")


def class_scores(z: np.ndarray, objective: str | None = None) -> np.ndarray | None:
    """Per-class scores as (batch, classes), or None if ``z`` is not a classifier's output
    (by its shape, or by the objective when it is known).  A head written as a 1×1
    convolution (SqueezeNet, the Caffe DenseNet) gives (batch, classes, 1, 1): the same
    scores, and they are read as such."""
    z = np.asarray(z)
    if objective in NOT_CLASS_SCORES or z.ndim < 2 or z.shape[1] < 2 or any(d != 1 for d in z.shape[2:]):
        return None
    return z.reshape(z.shape[0], z.shape[1])


def _cross_entropy(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row cross-entropy of logits ``z`` (rows x classes) against labels ``y``."""
    top = z.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
    return lse - z[np.arange(len(y)), y]


@dataclass
class Tally:
    loss_sum: float = 0.0
    correct: int = 0
    samples: int = 0

    def add(self, logits, labels: np.ndarray) -> None:
        if isinstance(logits, (tuple, list)):  # a session's outputs: (logits,)
            (logits,) = logits
        logits, labels = np.asarray(logits, dtype=np.float64), np.asarray(labels)
        if labels.ndim >= 2 and logits.ndim == labels.ndim + 1:
            logits = logits.reshape(-1, logits.shape[-1])  # per position, classes last
        z = class_scores(logits)
        y = labels.astype(np.int64).reshape(-1)
        if z is None or z.shape[0] != y.shape[0]:
            raise ValueError(
                f"logits of shape {list(np.shape(logits))} for {y.shape[0]} labels; expected (batch, classes)"
            )
        if y.size and (y.min() < 0 or y.max() >= z.shape[1]):
            raise ValueError(f"label {int(y.max())} outside the model's {z.shape[1]} classes")
        self.loss_sum += float(_cross_entropy(z, y).sum())
        self.correct += int((z.argmax(axis=1) == y).sum())
        self.samples += int(len(y))

    def result(self) -> dict[str, float | int]:
        if not self.samples:
            raise RuntimeError("the held-out split gave no samples")
        return {
            "loss": self.loss_sum / self.samples,
            "accuracy": self.correct / self.samples,
            "correct": self.correct,
            "samples": self.samples,
        }


@dataclass
class MaskedLMTally:
    """BERT pre-training: outputs (mlm_logits (B,T,V), nsp_logits (B,2)), labels
    (mlm_labels (B,T) with -100 where nothing is masked, nsp_labels (B,))."""

    mlm_loss_sum: float = 0.0
    mlm_correct: int = 0
    masked: int = 0
    nsp_loss_sum: float = 0.0
    nsp_correct: int = 0
    samples: int = 0

    def add(self, outputs, labels) -> None:
        mlm_logits, nsp_logits = (np.asarray(o, dtype=np.float64) for o in outputs)
        mlm_labels, nsp_labels = (np.asarray(a).astype(np.int64) for a in labels)
        keep = mlm_labels.reshape(-1) != -100
        z = mlm_logits.reshape(-1, mlm_logits.shape[-1])[keep]
        y = mlm_labels.reshape(-1)[keep]
        self.mlm_loss_sum += float(_cross_entropy(z, y).sum())
        self.mlm_correct += int((z.argmax(axis=1) == y).sum())
        self.masked += int(keep.sum())
        y = nsp_labels.reshape(-1)
        self.nsp_loss_sum += float(_cross_entropy(nsp_logits, y).sum())
        self.nsp_correct += int((nsp_logits.argmax(axis=1) == y).sum())
        self.samples += int(len(y))

    def result(self) -> dict[str, float | int]:
        if not self.samples or not self.masked:
            raise RuntimeError("the held-out split gave no samples (or no masked token)")
        return {
            "loss": self.mlm_loss_sum / self.masked + self.nsp_loss_sum / self.samples,
            "accuracy": self.mlm_correct / self.masked,
            "correct": self.mlm_correct,
            "samples": self.samples,
            "masked_tokens": self.masked,
            "nsp_accuracy": self.nsp_correct / self.samples,
        }


@dataclass
class SquaredErrorTally:
    """Regression: mean squared error per output element (the training loss); no accuracy."""

    error_sum: float = 0.0
    elements: int = 0
    samples: int = 0

    def add(self, outputs, targets) -> None:
        if isinstance(outputs, (tuple, list)):
            (outputs,) = outputs
        z = np.asarray(outputs, dtype=np.float64)
        t = np.asarray(targets, dtype=np.float64)
        if z.shape != t.shape:
            raise ValueError(f"outputs of shape {list(z.shape)} for targets {list(t.shape)}")
        self.error_sum += float(np.square(z - t).sum())
        self.elements += int(z.size)
        self.samples += int(z.shape[0]) if z.ndim else 1

    def result(self) -> dict[str, float | int]:
        if not self.elements:
            raise RuntimeError("the held-out split gave no samples")
        return {"loss": self.error_sum / self.elements, "accuracy": None, "samples": self.samples}


@dataclass
class TokenTally:
    """Translation with teacher forcing: logits (B, T, V) against target ids (B, T),
    padding (id 0) left out; the accuracy is per token, as the training loss is."""

    loss_sum: float = 0.0
    correct: int = 0
    tokens: int = 0
    samples: int = 0

    def add(self, outputs, labels) -> None:
        if isinstance(outputs, (tuple, list)):
            (outputs,) = outputs
        z = np.asarray(outputs, dtype=np.float64)
        y = np.asarray(labels).astype(np.int64)
        if z.shape[:-1] != y.shape:
            raise ValueError(f"logits of shape {list(z.shape)} for target ids {list(y.shape)}")
        keep = y.reshape(-1) != 0
        z, t = z.reshape(-1, z.shape[-1])[keep], y.reshape(-1)[keep]
        self.loss_sum += float(_cross_entropy(z, t).sum())
        self.correct += int((z.argmax(axis=1) == t).sum())
        self.tokens += int(keep.sum())
        self.samples += int(y.shape[0])

    def result(self) -> dict[str, float | int]:
        if not self.tokens:
            raise RuntimeError("the held-out split gave no target tokens")
        return {
            "loss": self.loss_sum / self.tokens,
            "accuracy": self.correct / self.tokens,
            "correct": self.correct,
            "samples": self.samples,
            "tokens": self.tokens,
        }


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: the probability that a random positive scores above
    a random negative, ties counting one half (the Mann-Whitney U statistic over
    both classes' counts).  Ranks are 1-based, tied scores share their mean rank;
    NaN when either class is absent (no pair to compare)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1).astype(bool)
    if s.shape != y.shape:
        raise ValueError(f"{s.size} scores for {y.size} labels")
    positives, negatives = int(y.sum()), int((~y).sum())
    if not positives or not negatives:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    # Mean 1-based rank of each run of equal scores.
    starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    ranks = np.empty(len(s), np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    u = ranks[y].sum() - positives * (positives + 1) / 2.0
    return float(u / (positives * negatives))


@dataclass
class ClickTally(Tally):
    """CTR: the 2-logit classification tally, plus the AUC of p(click) =
    softmax(z)[1] (ranked as z1 - z0, the same order without overflow)."""

    def __post_init__(self):
        self.scores: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []

    def add(self, logits, labels: np.ndarray) -> None:
        super().add(logits, labels)
        if isinstance(logits, (tuple, list)):
            (logits,) = logits
        z = np.asarray(logits, dtype=np.float64).reshape(-1, 2)
        self.scores.append(z[:, 1] - z[:, 0])
        self.labels.append(np.asarray(labels).reshape(-1))

    def result(self) -> dict[str, float | int]:
        out = super().result()
        return {**out, "auc": roc_auc(np.concatenate(self.scores), np.concatenate(self.labels))}


@dataclass
class CharacterErrorTally:
    """CTC: outputs (logits (B, frames, classes),), labels (transcripts (B, S) padded,
    transcript lengths (B,), output frames (B,)); decoding is greedy, outside the graph."""

    loss_sum: float = 0.0
    errors: int = 0
    chars: int = 0
    exact: int = 0
    samples: int = 0

    def add(self, outputs, labels) -> None:
        from dlbench.models.deepspeech2 import ctc

        if isinstance(outputs, (tuple, list)):
            (outputs,) = outputs
        logits = np.asarray(outputs, dtype=np.float64)
        transcripts, lengths, frames = (np.asarray(a).astype(np.int64) for a in labels)
        if logits.ndim != 3 or logits.shape[0] != len(lengths):
            raise ValueError(
                f"logits of shape {list(logits.shape)} for {len(lengths)} "
                f"transcripts; expected (batch, frames, classes)"
            )
        for z, target, n, t in zip(logits, transcripts, lengths, frames):
            ref = target[:n].tolist()
            self.loss_sum += ctc.nll(z, ref, int(t))
            distance = ctc.edit_distance(ctc.greedy(z, int(t)), ref)
            self.errors += distance
            self.exact += int(distance == 0)
            self.chars += len(ref)
            self.samples += 1

    def result(self) -> dict[str, float | int]:
        if not self.samples or not self.chars:
            raise RuntimeError("the held-out split gave no samples (or no characters)")
        cer = self.errors / self.chars
        return {
            "loss": self.loss_sum / self.samples,
            "accuracy": max(0.0, 1.0 - cer),
            "cer": cer,
            "exact_transcripts": self.exact,
            "samples": self.samples,
        }


# Tallies that need the model's configuration (SSD's priors and loss settings, Mask
# R-CNN's output layout).
NEEDS_CONFIG = {"detection", "instance-segmentation"}


TALLIES = {
    "classification": Tally,
    "bert-pretraining": MaskedLMTally,
    "regression": SquaredErrorTally,
    "ctr": ClickTally,
    "ctc": CharacterErrorTally,
    "seq2seq": TokenTally,
    "detection": DetectionTally,
    "instance-segmentation": InstanceSegmentationTally,
}


# Objectives whose exported (inference) network is the trained one and whose held-out
# score is their own, not a classifier's: ``dlbench eval`` scores their artifacts with it.
INFERENCE_TALLIES = ("ctc", "ctr", "seq2seq", "detection", "instance-segmentation")


def inference_tally(objective: str, spec=None):
    """The tally ``dlbench eval`` scores an artifact with: the objective's own where its
    inference network is what training built (CTC logits), else the classifier's.
    SSD's and Mask R-CNN's need ``spec`` (priors, output layout)."""
    return tally_for(objective, spec) if objective in INFERENCE_TALLIES else Tally()


def tally_for(objective: str, spec=None):
    try:
        cls = TALLIES[objective]
    except KeyError:
        raise ValueError(f"no held-out score is defined for objective {objective!r}") from None
    if objective in NEEDS_CONFIG:
        if spec is None:
            raise ValueError(f"the {objective} score needs the model's spec")
        return cls(dict(spec.config))
    return cls()
