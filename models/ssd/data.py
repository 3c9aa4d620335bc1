"""Learnable synthetic detection data: coloured rectangles whose class is the colour.

Each image is a dark noisy background with two or three axis-aligned
rectangles, each filled with its class's colour plus noise, their sizes cycling
through the prior scales of the six maps; the boxes are known exactly, so a
detector's loss falls within a few steps (colour gives the class, the edges
give the box).  Only ``ACTIVE_CLASSES`` colours are used, for the reason
``models.synthetic`` gives.  Matching against the priors (``boxes.targets``)
happens here, before the clock.  A batch is
``(images, (class targets (B, P) float32, box targets (B, P, 4) float32))``;
the class targets are float so that both label arrays share one dtype (the
sessions convert labels to one dtype per objective), and each loss casts them
back to integers.
"""

from __future__ import annotations

import numpy as np

from dlbench.models.registry import ModelSpec
from dlbench.models.ssd import boxes as B

# Well-separated RGB colours of classes 1..6 (0 is the background).
COLOURS = np.array([(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1)], np.float32)
ACTIVE_CLASSES = len(COLOURS)
NOISE = 0.1
OBJECTS = (2, 3)  # rectangles per image, at least and at most


def scene(rng: np.random.Generator, size: int, scales) -> tuple[np.ndarray, ...]:
    """(image (3, size, size) in [0, 1], corner boxes (n, 4), classes (n,)); one
    rectangle per entry of ``scales`` (its side's geometric mean, jittered +-15 %,
    aspect ratio 1/2..2), painted largest first so small ones stay whole."""
    img = 0.2 + NOISE * rng.standard_normal((3, size, size)).astype(np.float32)
    s = np.asarray(scales) * rng.uniform(0.85, 1.15, len(scales))
    ratio = np.sqrt(np.exp(rng.uniform(np.log(0.5), np.log(2.0), len(scales))))
    wh = np.clip(np.stack([s * ratio, s / ratio], 1), 0.05, 0.98)
    wh = wh[np.argsort(-wh.prod(1))]
    lo = rng.uniform(0, 1 - wh)
    px = np.round(np.concatenate([lo, lo + wh], 1) * size).astype(int)
    classes = rng.integers(1, ACTIVE_CLASSES + 1, len(wh))
    for (x0, y0, x1, y1), c in zip(px, classes):
        patch = img[:, y0:y1, x0:x1]
        patch[...] = COLOURS[c - 1][:, None, None] + NOISE * rng.standard_normal(patch.shape)
    return img, px / size, classes


def detection_batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0, layout: str = "NCHW"
) -> list[tuple[np.ndarray, tuple[np.ndarray, ...]]]:
    """``n_batches`` (images, (class targets, box targets)); images centred at 0."""
    size = spec.inputs[0].shape[-1]
    rng = np.random.default_rng(seed)
    # Object sizes cycle through the maps' prior scales across a batch, so a batch of
    # three or more images puts positives on every map (every head learns).
    scales = spec.config["min_scales"]
    out = []
    for _ in range(n_batches):
        counts = rng.integers(OBJECTS[0], OBJECTS[1] + 1, batch_size)
        first = np.concatenate([[0], np.cumsum(counts)])
        scenes = [
            scene(rng, size, [scales[(first[i] + k) % len(scales)] for k in range(n)])
            for i, n in enumerate(counts)
        ]
        images = (np.stack([s[0] for s in scenes]) - 0.5) / 0.25
        if layout == "NHWC":
            images = images.transpose(0, 2, 3, 1)
        cls_t, loc_t = B.targets(spec.config, [s[1] for s in scenes], [s[2] for s in scenes])
        out.append((np.ascontiguousarray(images, np.float32), (cls_t, loc_t)))
    return out
