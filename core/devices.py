"""Device names: one vocabulary for training and one for inference, mapped here only.

Training says ``gpu`` (what its users type and its records carry since the first
release); inference backends say ``cuda`` (what the engines call it and what a
record's runtime block reports).  Both spellings are accepted everywhere; each
side normalizes to its own with the two functions below.
"""

from __future__ import annotations

TRAINING = ("cpu", "gpu", "ascend")
INFERENCE = ("cpu", "cuda", "ascend")
_TO_INFERENCE = {"gpu": "cuda"}
_TO_TRAINING = {"cuda": "gpu"}


def inference_name(device: str) -> str:
    """``gpu`` → ``cuda``; anything else unchanged."""
    return _TO_INFERENCE.get(device, device)


def training_name(device: str) -> str:
    """``cuda`` → ``gpu``; anything else unchanged."""
    return _TO_TRAINING.get(device, device)


def is_nvidia(device: str | None) -> bool:
    return device in ("cuda", "gpu")
