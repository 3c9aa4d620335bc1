"""Mask R-CNN's box arithmetic in numpy, in one place: anchors, box deltas and the
training targets every framework's loss receives (IoU and NMS are SSD's, shared).

Boxes are pixel corners (x0, y0, x1, y1) of the square input image, continuous
coordinates (Detectron2's convention: width = x1 - x0, no "+1").  Everything that
selects or matches boxes happens here, outside the graph (``models.maskrcnn``'s
docstring says why): targets are made before the clock from ground truth (boxes,
classes, instance masks at the input's resolution), and inference post-processing
(``models.maskrcnn.inference``) decodes the raw heads afterwards.

Targets follow Detectron2's COCO recipe, except that the box head's RoIs are sampled
from jittered ground truth and random background instead of the RPN's current
proposals (a training step does not select boxes):

* RPN: an anchor is positive with IoU >= 0.7 to some ground-truth box, negative
  below 0.3, and each ground-truth box's best anchors (ties included) are positive;
  256 anchors an image are sampled, at most half positive, the others are -1;
* RoIs: ``cfg["rois"]`` an image, a quarter foreground (a jittered copy of a
  ground-truth box with IoU >= 0.5 to it, and to no other box more), labelled with
  that box's class, the rest background (IoU < 0.5 to every box), labelled 0;
* masks: the foreground RoIs (``cfg["mask_rois"]`` at most), padded with class 0 on
  the whole image; the target is the instance's mask read in the box at 28 x 28 by
  ``reference.roi_align``'s sampling, then >= 0.5 (Detectron2's ``crop_and_resize``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dlbench.models import maskrcnn as M
from dlbench.models.maskrcnn import reference
from dlbench.models.ssd.boxes import iou, nms  # noqa: F401  (shared corner-box IoU and NMS)

RPN_WEIGHTS = (1.0, 1.0, 1.0, 1.0)
DELTA_CLAMP = math.log(1000.0 / 16)  # largest dw, dh decoded (Detectron's)
RPN_POSITIVE, RPN_NEGATIVE = 0.7, 0.3
RPN_SAMPLES, RPN_POSITIVE_SHARE = 256, 0.5
ROI_FOREGROUND_SHARE, ROI_FOREGROUND_IOU = 0.25, 0.5
JITTER = 0.1  # std of the centre shift (box sides) and log scale
TRIES = 20  # rounds of rejection sampling before a fallback


# --- geometry ------------------------------------------------------------------------------


def anchors(cfg: dict) -> np.ndarray:
    """(num_anchors, 4) float64 corners in the RPN's output order: level P2..P6, row,
    column, then anchor a over ``ASPECT_RATIOS`` (r = height / width: h = s sqrt(r),
    w = s / sqrt(r)), side s = ``cfg["anchor_sizes"]`` of the level, centred on the
    cell's centre ((column + 0.5) stride, (row + 0.5) stride)."""
    out = []
    ratios = np.asarray(M.ASPECT_RATIOS, np.float64)
    for k, (level, side) in enumerate(M.level_sizes(cfg).items()):
        s, st = cfg["anchor_sizes"][k], M.stride(level)
        h, w = s * np.sqrt(ratios), s / np.sqrt(ratios)
        centre = (np.arange(side) + 0.5) * st
        cy, cx = (c.reshape(-1, 1) for c in np.meshgrid(centre, centre, indexing="ij"))
        out.append(np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1).reshape(-1, 4))
    return np.concatenate(out)


@functools.lru_cache(maxsize=8)
def _cached(key: tuple) -> np.ndarray:
    a = anchors(dict(key))
    a.flags.writeable = False
    return a


def anchors_for(cfg: dict) -> np.ndarray:
    """``anchors(cfg)``, computed once per configuration (read-only)."""
    return _cached(tuple(sorted(cfg.items())))


def anchor_levels(cfg: dict) -> np.ndarray:
    """The level (2..6) of each anchor, in ``anchors`` order."""
    a = len(M.ASPECT_RATIOS)
    return np.concatenate([np.full(s * s * a, lv) for lv, s in M.level_sizes(cfg).items()])


def area(b: np.ndarray) -> np.ndarray:
    return np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)


def clip(b: np.ndarray, size: float) -> np.ndarray:
    return np.clip(b, 0.0, size)


def encode(gt: np.ndarray, ref: np.ndarray, weights=RPN_WEIGHTS) -> np.ndarray:
    """Deltas (dx, dy, dw, dh) that take boxes ``ref`` to ``gt`` (Detectron's, with
    ``weights`` (wx, wy, ww, wh): dx = wx (gx - rx) / rw, dw = ww log(gw / rw))."""
    wx, wy, ww, wh = weights
    rw, rh = ref[..., 2] - ref[..., 0], ref[..., 3] - ref[..., 1]
    gw, gh = gt[..., 2] - gt[..., 0], gt[..., 3] - gt[..., 1]
    dx = wx * ((gt[..., 0] + gt[..., 2]) - (ref[..., 0] + ref[..., 2])) / 2 / rw
    dy = wy * ((gt[..., 1] + gt[..., 3]) - (ref[..., 1] + ref[..., 3])) / 2 / rh
    return np.stack([dx, dy, ww * np.log(gw / rw), wh * np.log(gh / rh)], -1)


def decode(deltas: np.ndarray, ref: np.ndarray, weights=RPN_WEIGHTS) -> np.ndarray:
    """Boxes from ``deltas`` (..., 4) on ``ref`` (broadcast); dw, dh clamped at
    log(1000 / 16) so that an untrained head cannot overflow."""
    wx, wy, ww, wh = weights
    rw, rh = ref[..., 2] - ref[..., 0], ref[..., 3] - ref[..., 1]
    cx, cy = ref[..., 0] + rw / 2, ref[..., 1] + rh / 2
    x = cx + deltas[..., 0] / wx * rw
    y = cy + deltas[..., 1] / wy * rh
    w = rw * np.exp(np.minimum(deltas[..., 2] / ww, DELTA_CLAMP))
    h = rh * np.exp(np.minimum(deltas[..., 3] / wh, DELTA_CLAMP))
    return np.stack([x - w / 2, y - h / 2, x + w / 2, y + h / 2], -1)


# --- training targets ----------------------------------------------------------------------


def rpn_targets(anc: np.ndarray, gt: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(labels (N,) 1 / 0 / -1, deltas (N, 4)) of one image's anchors."""
    n = len(anc)
    labels = np.full(n, -1.0)
    deltas = np.zeros((n, 4))
    if len(gt):
        overlap = iou(anc, gt)
        match, best = overlap.argmax(1), overlap.max(1)
        labels[best < RPN_NEGATIVE] = 0
        labels[best >= RPN_POSITIVE] = 1
        top = overlap.max(0)
        labels[((overlap == top) & (top > 0)).any(1)] = 1
    else:
        labels[:] = 0
        match = np.zeros(n, np.int64)
    pos = np.flatnonzero(labels == 1)
    most = int(RPN_SAMPLES * RPN_POSITIVE_SHARE)
    if len(pos) > most:
        labels[rng.choice(pos, len(pos) - most, replace=False)] = -1
        pos = np.flatnonzero(labels == 1)
    neg = np.flatnonzero(labels == 0)
    if len(neg) > RPN_SAMPLES - len(pos):
        labels[rng.choice(neg, len(neg) - (RPN_SAMPLES - len(pos)), replace=False)] = -1
    if len(pos):
        deltas[pos] = encode(gt[match[pos]], anc[pos], RPN_WEIGHTS)
    return labels, deltas


def _jittered(gt: np.ndarray, n: int, size: float, rng: np.random.Generator):
    """(boxes (n, 4), source index (n,)): copies of the ground-truth boxes in turn,
    centre shifted and sides scaled at random, kept when IoU >= 0.5 with their source
    and no other box overlaps them more; a slot still empty after ``TRIES`` rounds
    takes its source box itself."""
    src = np.arange(n) % len(gt)
    out = gt[src].copy()
    todo = np.arange(n)
    for _ in range(TRIES):
        if not todo.size:
            break
        g = gt[src[todo]]
        wh = g[:, 2:] - g[:, :2]
        centre = (g[:, :2] + g[:, 2:]) / 2 + JITTER * wh * rng.standard_normal((len(todo), 2))
        half = wh * np.exp(JITTER * rng.standard_normal((len(todo), 2))) / 2
        cand = clip(np.concatenate([centre - half, centre + half], 1), size)
        overlap = iou(cand, gt)
        own = overlap[np.arange(len(todo)), src[todo]]
        ok = (own >= ROI_FOREGROUND_IOU) & (overlap.argmax(1) == src[todo]) & (area(cand) > 0)
        out[todo[ok]] = cand[ok]
        todo = todo[~ok]
    return out, src


def _background(gt: np.ndarray, n: int, size: float, rng: np.random.Generator) -> np.ndarray:
    """(n, 4) boxes with IoU < 0.5 to every ground-truth box: half anywhere (sides
    log-uniform in size/32..size/2, aspect 1/2..2), half ground truth shifted by
    half to one and a half of its sides (hard negatives next to objects)."""
    out = np.zeros((0, 4))
    for _ in range(TRIES):
        if len(out) >= n:
            break
        m = 2 * (n - len(out)) + 2
        side = size * np.exp(rng.uniform(np.log(1 / 32), np.log(1 / 2), m))
        aspect = np.exp(rng.uniform(np.log(0.5), np.log(2.0), m))
        wh = np.stack([side / np.sqrt(aspect), side * np.sqrt(aspect)], 1)
        lo = rng.uniform(0, 1, (m, 2)) * (size - wh)
        cand = np.concatenate([lo, lo + wh], 1)
        if len(gt):
            near = rng.random(m) < 0.5
            g = gt[rng.integers(0, len(gt), m)]
            gwh = g[:, 2:] - g[:, :2]
            shift = rng.uniform(0.5, 1.5, (m, 2)) * rng.choice([-1, 1], (m, 2)) * gwh
            cand[near] = np.concatenate([g[:, :2] + shift, g[:, 2:] + shift], 1)[near]
            cand = clip(cand, size)
            ok = (iou(cand, gt).max(1) < ROI_FOREGROUND_IOU) & (area(cand) >= 1.0)
            cand = cand[ok]
        out = np.concatenate([out, cand])
    if len(out) < n:  # nothing found: a full image of background
        out = np.concatenate([out, np.tile([0.0, 0.0, size, size], (n - len(out), 1))])
    return out[:n]


def sample_rois(
    gt: np.ndarray, classes: np.ndarray, count: int, size: float, weights, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """(RoIs (count, 4), labels (count,), deltas (count, 4), source ground-truth index
    (count,), -1 for background) of one image, foreground first."""
    n_fg = int(round(ROI_FOREGROUND_SHARE * count)) if len(gt) else 0
    fg, src = _jittered(gt, n_fg, size, rng) if n_fg else (np.zeros((0, 4)), np.zeros(0, int))
    bg = _background(gt, count - n_fg, size, rng)
    rois = np.concatenate([fg, bg])
    labels = np.concatenate([np.asarray(classes)[src], np.zeros(len(bg))]).astype(np.float64)
    deltas = np.zeros((count, 4))
    if n_fg:
        deltas[:n_fg] = encode(gt[src], fg, weights)
    return rois, labels, deltas, np.concatenate([src, np.full(len(bg), -1)])


def mask_targets(mask: np.ndarray, boxes: np.ndarray, size: int, ratio: int) -> np.ndarray:
    """(len(boxes), size, size) 0/1: the (H, W) mask read in each box as RoIAlign reads
    a level of stride 1 (``reference.sample_points`` and ``bilinear``), >= 0.5."""
    fmap = np.asarray(mask, np.float64)[None]
    out = np.zeros((len(boxes), size, size))
    for k, box in enumerate(np.asarray(boxes, np.float64)):
        y, x = reference.sample_points(box, 1.0, size, ratio)
        v = reference.bilinear(fmap, y, x)[0]
        out[k] = v.reshape(size, ratio, size, ratio).mean((1, 3)) >= 0.5
    return out


def image_targets(
    cfg: dict, gt: np.ndarray, classes: np.ndarray, masks: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """One image's (rois, mask_rois, rpn_labels, rpn_targets, roi_labels, roi_targets,
    mask_classes, mask_targets) from its ground truth: ``gt`` (G, 4) pixel corners,
    ``classes`` (G,) 1..K, ``masks`` (G, S, S) 0/1 at the input's resolution."""
    size = float(cfg["image_size"])
    gt = np.asarray(gt, np.float64).reshape(-1, 4)
    rpn_lab, rpn_tgt = rpn_targets(anchors_for(cfg), gt, rng)
    rois, roi_lab, roi_tgt, src = sample_rois(gt, classes, cfg["rois"], size, cfg["box_weights"], rng)
    d, m = cfg["mask_rois"], cfg["mask_size"]
    fg = np.flatnonzero(roi_lab > 0)[:d]
    mask_rois = np.tile([0.0, 0.0, size, size], (d, 1))
    mask_rois[: len(fg)] = rois[fg]
    mask_cls = np.zeros(d)
    mask_cls[: len(fg)] = roi_lab[fg]
    mask_tgt = np.zeros((d, m, m))
    for g in np.unique(src[fg]):
        own = fg[src[fg] == g]
        mask_tgt[np.searchsorted(fg, own)] = mask_targets(masks[g], rois[own], m, cfg["sampling_ratio"])
    return rois, mask_rois, rpn_lab, rpn_tgt, roi_lab, roi_tgt, mask_cls, mask_tgt


def batch_targets(cfg: dict, scenes, rng: np.random.Generator):
    """``((rois, mask_rois), (the six labels))`` float32, stacked over ``scenes`` of
    (boxes, classes, masks): the box inputs beside the image, and the labels in
    ``objectives.LABELS["instance-segmentation"]`` order."""
    per = [image_targets(cfg, b, c, m, rng) for b, c, m in scenes]
    stacked = [np.ascontiguousarray(np.stack([p[k] for p in per]), np.float32) for k in range(8)]
    return tuple(stacked[:2]), tuple(stacked[2:])
