"""Learnable synthetic instance segmentation: coloured ellipses and rectangles whose
class is the colour, with their masks known to the pixel.

Each image is SSD's dark noisy background (``models.ssd.data``: the same colours
and noise) with two or three shapes, each an ellipse or a rectangle filled with
its class's colour plus noise, their sizes cycling through the anchor sides of
P3..P6 (so every RoI level and most anchor levels see objects), painted largest
first; an object's mask is what stays visible of it, its box the mask's tight
box.  Colour gives the class, edges give boxes and masks, so all five losses
fall within a few steps.  Targets are made here, before the clock
(``boxes.batch_targets``).  A batch is ``((images, rois, mask_rois), (rpn_labels,
rpn_targets, roi_labels, roi_targets, mask_classes, mask_targets))``, all float32
(one label dtype per objective; the losses cast what they index with).
"""

from __future__ import annotations

import numpy as np

from dlbench.models.maskrcnn import boxes as B
from dlbench.models.registry import ModelSpec
from dlbench.models.ssd.data import ACTIVE_CLASSES, COLOURS, NOISE

OBJECTS = (2, 3)  # shapes per image, at least and at most


def scene(rng: np.random.Generator, size: int, sides, classes: int) -> tuple[np.ndarray, ...]:
    """(image (3, size, size) in about [0, 1], boxes (n, 4) pixel corners, classes
    (n,) 1.., masks (n, size, size) 0/1): one shape per entry of ``sides`` (the
    geometric mean of its sides, +-15 %, aspect 1/2..2)."""
    img = 0.2 + NOISE * rng.standard_normal((3, size, size)).astype(np.float32)
    s = np.asarray(sides, np.float64) * rng.uniform(0.85, 1.15, len(sides))
    ratio = np.sqrt(np.exp(rng.uniform(np.log(0.5), np.log(2.0), len(sides))))
    wh = np.clip(np.stack([s * ratio, s / ratio], 1), 4.0, 0.95 * size)
    wh = wh[np.argsort(-wh.prod(1))]
    lo = rng.uniform(0, 1, wh.shape) * (size - wh)
    centre = lo + wh / 2
    ellipse = rng.random(len(wh)) < 0.5
    labels = rng.integers(1, min(ACTIVE_CLASSES, classes - 1) + 1, len(wh))
    owner = np.full((size, size), -1)
    px = np.arange(size) + 0.5
    for k in range(len(wh)):
        dx = (px[None, :] - centre[k, 0]) / (wh[k, 0] / 2)
        dy = (px[:, None] - centre[k, 1]) / (wh[k, 1] / 2)
        region = (dx * dx + dy * dy <= 1) if ellipse[k] else ((abs(dx) <= 1) & (abs(dy) <= 1))
        owner[region] = k
        colour = COLOURS[labels[k] - 1][:, None]
        img[:, region] = colour + NOISE * rng.standard_normal((3, int(region.sum())))
    masks, boxes, kept = [], [], []
    for k in range(len(wh)):
        m = owner == k
        if not m.any():
            continue
        rows, cols = np.flatnonzero(m.any(1)), np.flatnonzero(m.any(0))
        boxes.append((cols[0], rows[0], cols[-1] + 1, rows[-1] + 1))
        masks.append(m)
        kept.append(labels[k])
    return (
        img,
        np.asarray(boxes, np.float64).reshape(-1, 4),
        np.asarray(kept, np.int64),
        np.asarray(masks, np.float32).reshape(-1, size, size),
    )


def instance_batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0, layout: str = "NCHW"
) -> list[tuple[tuple[np.ndarray, ...], tuple]]:
    """``n_batches`` ((images, rois, mask_rois), six labels); images centred at 0, in
    ``layout`` (NCHW, or NHWC for Keras); the boxes are pixel corners either way."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be NCHW or NHWC, not {layout}")
    cfg = spec.config
    size = cfg["image_size"]
    sides = cfg["anchor_sizes"][1:]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        counts = rng.integers(OBJECTS[0], OBJECTS[1] + 1, batch_size)
        first = np.concatenate([[0], np.cumsum(counts)])
        scenes = [
            scene(rng, size, [sides[(first[i] + k) % len(sides)] for k in range(n)], spec.num_classes)
            for i, n in enumerate(counts)
        ]
        images = (np.stack([s[0] for s in scenes]) - 0.5) / 0.25
        if layout == "NHWC":
            images = images.transpose(0, 2, 3, 1)
        (rois, mask_rois), labels = B.batch_targets(cfg, [s[1:] for s in scenes], rng)
        out.append(((np.ascontiguousarray(images, np.float32), rois, mask_rois), labels))
    return out
