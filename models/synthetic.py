"""Synthetic data that a network can actually learn.

Uniform noise with random labels measures speed but can never show that the
training step works (the loss cannot fall below chance).  Here every class has
a fixed low-resolution pattern, upsampled to the input size, and a sample is
its class's pattern plus noise: the label is a function of the image, so the
loss of a correct training loop falls within a few steps.  Labels are drawn
from at most ``ACTIVE_CLASSES`` classes: a thousand-class network sees each
class about once in a short run and cannot show learning, while with a few
active classes its loss falls from ln(classes) within a handful of steps.
Label values cost nothing at run time, so the timings are unaffected.  One
seed drives everything; the same seed gives the same bytes.
"""
from __future__ import annotations

import numpy as np

from models.registry import ModelSpec

PATTERN_RES = 8      # side of the per-class pattern before upsampling
NOISE = 0.5
ACTIVE_CLASSES = 16
# Cap the memory the pre-generated pool may take; batches are cycled.
POOL_BYTES = 512 * 2**20
MAX_POOL_BATCHES = 8


def pool_size(spec: ModelSpec, batch_size: int, wanted: int) -> int:
    """How many distinct batches to pre-generate (at least 1)."""
    sample_bytes = sum(int(np.prod(i.shape)) * np.dtype(i.dtype).itemsize for i in spec.inputs)
    fit = max(1, POOL_BYTES // max(1, sample_bytes * batch_size))
    return int(max(1, min(wanted, MAX_POOL_BATCHES, fit)))


def image_batches(spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0,
                  layout: str = "NCHW") -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_batches`` (images float32, labels int32) pairs, in ``layout`` (NCHW or NHWC)."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be NCHW or NHWC, not {layout}")
    channels, height, width = spec.inputs[0].shape
    rng = np.random.default_rng(seed)
    patterns = rng.standard_normal(
        (spec.num_classes, channels, PATTERN_RES, PATTERN_RES)).astype(np.float32)
    reps_h, reps_w = -(-height // PATTERN_RES), -(-width // PATTERN_RES)
    out = []
    for _ in range(n_batches):
        labels = rng.integers(0, min(spec.num_classes, ACTIVE_CLASSES),
                              size=batch_size).astype(np.int32)
        base = patterns[labels].repeat(reps_h, axis=2).repeat(reps_w, axis=3)[:, :, :height, :width]
        images = base + NOISE * rng.standard_normal(base.shape, dtype=np.float32)
        if layout == "NHWC":
            images = images.transpose(0, 2, 3, 1)
        out.append((np.ascontiguousarray(images, dtype=np.float32), labels))
    return out
