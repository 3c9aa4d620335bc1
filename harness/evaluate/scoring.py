"""Cross-entropy and top-1 accuracy from logits, accumulated over batches.

Computed on the host in float64 from whatever the backend returned (float16
logits of an FP16 model included), so the figures of different backends and
precisions differ only by what the models computed, never by how the score
was summed.  Same definitions as ``dlbench train --eval``: mean cross-entropy
per sample (log-sum-exp minus the true class's logit) and the share of samples
whose arg-max is the label.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Tally:
    loss_sum: float = 0.0
    correct: int = 0
    samples: int = 0

    def add(self, logits: np.ndarray, labels: np.ndarray) -> None:
        z = np.asarray(logits, dtype=np.float64)
        y = np.asarray(labels).astype(np.int64).reshape(-1)
        if z.ndim != 2 or z.shape[0] != y.shape[0]:
            raise ValueError(f"logits of shape {list(z.shape)} for {y.shape[0]} labels; "
                             f"expected (batch, classes)")
        if y.size and (y.min() < 0 or y.max() >= z.shape[1]):
            raise ValueError(f"label {int(y.max())} outside the model's {z.shape[1]} classes")
        top = z.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
        self.loss_sum += float((lse - z[np.arange(len(y)), y]).sum())
        self.correct += int((z.argmax(axis=1) == y).sum())
        self.samples += int(len(y))

    def result(self) -> dict[str, float | int]:
        if not self.samples:
            raise RuntimeError("the held-out split gave no samples")
        return {"loss": self.loss_sum / self.samples, "accuracy": self.correct / self.samples,
                "correct": self.correct, "samples": self.samples}
