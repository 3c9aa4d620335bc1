"""Mask R-CNN's box reading and losses in numpy: the one definition the three
frameworks implement in their own plain ops and are tested against.

RoIAlign (Detectron2's ``ROIAlign(aligned=True)``, torchvision's ``roi_align(...,
aligned=True)``): a box (x0, y0, x1, y1) in image pixels is read from the level
``roi_levels`` gives, scaled by 1 / stride and shifted by half a pixel; it is split
into S x S bins, each averaged over ``ratio`` x ``ratio`` sample points at the
centres of a regular grid in the bin, each sample bilinear in the feature map.  A
sample more than one pixel outside the map (y < -1, y > H, x < -1, x > W) reads 0;
otherwise it is clamped into [0, H - 1] x [0, W - 1] first.  The frameworks
implement it as gathers on the flattened map (no RoIAlign kernel exists in Keras,
and one definition keeps the three graphs and the ONNX file the same), so its
multiply-adds are not counted.

The loss of a training step, the sum of five terms (labels float32, made before
the clock by ``models.maskrcnn.boxes``):

* RPN objectness: mean binary cross-entropy with logits over the anchors whose label
  is 0 or 1 (-1: not sampled);
* RPN boxes: smooth-L1 (beta 1/9) of the four deltas of anchors labelled 1, summed,
  over the number of sampled anchors;
* box classes: mean cross-entropy over the boxes whose label is >= 0 (-1: padding);
* box deltas: smooth-L1 (beta 1/9) of the deltas of the box's labelled class, for
  labels > 0, summed over coordinates and boxes, over the number of boxes labelled
  >= 0;
* masks: mean binary cross-entropy with logits of the labelled class's 28 x 28 map
  against the target mask, over the mask boxes whose class is > 0 (0: padding)
  and their pixels.

Counts under a division are clamped to at least 1, per batch (not per image).
"""

from __future__ import annotations

import numpy as np

from dlbench.models import maskrcnn as M

SMOOTH_L1_BETA = 1.0 / 9.0


def roi_levels(boxes: np.ndarray, cfg: dict) -> np.ndarray:
    """FPN eq. 1: the level (2..5) each box (..., 4) is read from."""
    w = boxes[..., 2] - boxes[..., 0]
    h = boxes[..., 3] - boxes[..., 1]
    scale = np.sqrt(np.maximum(w * h, 0.0))
    k = np.floor(M.CANONICAL_LEVEL + np.log2(scale / cfg["canonical_size"] + 1e-6))
    return np.clip(k, M.ROI_LEVELS[0], M.ROI_LEVELS[-1]).astype(np.int64)


def bilinear(fmap: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(C, H, W) map read at points (y, x) of any equal shapes: (C, *shape)."""
    _, h, w = fmap.shape
    inside = (y >= -1.0) & (y <= h) & (x >= -1.0) & (x <= w)
    y = np.clip(y, 0.0, h - 1)
    x = np.clip(x, 0.0, w - 1)
    y0 = np.floor(y).astype(np.int64)
    x0 = np.floor(x).astype(np.int64)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    ly, lx = y - y0, x - x0
    hy, hx = 1.0 - ly, 1.0 - lx
    out = (
        fmap[:, y0, x0] * (hy * hx)
        + fmap[:, y0, x1] * (hy * lx)
        + fmap[:, y1, x0] * (ly * hx)
        + fmap[:, y1, x1] * (ly * lx)
    )
    return out * inside


def sample_points(box: np.ndarray, scale: float, size: int, ratio: int):
    """(y, x) of the size*ratio x size*ratio sample grid of one box on a level of
    ``scale`` (1 / stride): the points of bin (i, j) are rows i*ratio..(i+1)*ratio-1."""
    x0, y0, x1, y1 = box * scale - 0.5
    bw, bh = (x1 - x0) / size, (y1 - y0) / size
    steps = (np.arange(size * ratio) + 0.5) / ratio  # bin index + sample offset
    ys, xs = y0 + steps * bh, x0 + steps * bw
    return np.meshgrid(ys, xs, indexing="ij")


def roi_align(levels: dict[int, np.ndarray], boxes: np.ndarray, cfg: dict, size: int) -> np.ndarray:
    """``levels``: {level: (C, H, W)} of one image; ``boxes`` (N, 4) pixels ->
    (N, C, size, size)."""
    ratio = cfg["sampling_ratio"]
    which = roi_levels(boxes, cfg)
    out = []
    for box, level in zip(boxes.astype(np.float64), which):
        fmap = levels[int(level)].astype(np.float64)
        y, x = sample_points(box, 1.0 / M.stride(int(level)), size, ratio)
        v = bilinear(fmap, y, x)  # (C, S*r, S*r)
        c = v.shape[0]
        out.append(v.reshape(c, size, ratio, size, ratio).mean((2, 4)))
    return np.asarray(out, np.float32).reshape(len(boxes), -1, size, size)


def _bce(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))


def _smooth_l1(d: np.ndarray) -> np.ndarray:
    a = np.abs(d)
    return np.where(a < SMOOTH_L1_BETA, 0.5 * a * a / SMOOTH_L1_BETA, a - 0.5 * SMOOTH_L1_BETA)


def loss_terms(logits: np.ndarray, labels: tuple[np.ndarray, ...], cfg: dict) -> dict:
    """The five terms for (batch, L) ``logits`` and the labels in
    ``objectives.LABELS["instance-segmentation"]`` order."""
    rpn_lab, rpn_tgt, roi_lab, roi_tgt, mask_cls, mask_tgt = (np.asarray(x, np.float64) for x in labels)
    parts = M.split_output(cfg, np.asarray(logits, np.float64))
    b = logits.shape[0]
    rpn = np.concatenate([parts[f"rpn.p{lv}"].reshape(b, -1, 5) for lv in M.LEVELS], 1)
    sampled = rpn_lab >= 0
    n_rpn = max(sampled.sum(), 1)
    c = cfg["num_classes"]
    box = parts["box"]
    cls_z, deltas = box[..., :c], box[..., c:].reshape(b, -1, c, 4)
    valid = roi_lab >= 0
    lab = np.clip(roi_lab, 0, None).astype(np.int64)
    z = cls_z - cls_z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, lab[..., None], -1)[..., 0]
    picked = np.take_along_axis(deltas, lab[..., None, None].repeat(4, -1), 2)[:, :, 0]
    n_roi = max(valid.sum(), 1)
    masks = parts["mask"]
    mcls = mask_cls.astype(np.int64)
    mz = np.take_along_axis(masks, mcls[:, :, None, None, None], 2)[:, :, 0]
    mvalid = mcls > 0
    m2 = cfg["mask_size"] ** 2
    return {
        "rpn_objectness": (_bce(rpn[..., 0], rpn_lab) * sampled).sum() / n_rpn,
        "rpn_box": (_smooth_l1(rpn[..., 1:] - rpn_tgt).sum(-1) * (rpn_lab == 1)).sum() / n_rpn,
        "box_class": (ce * valid).sum() / n_roi,
        "box_delta": (_smooth_l1(picked - roi_tgt).sum(-1) * (roi_lab > 0)).sum() / n_roi,
        "mask": (_bce(mz, mask_tgt).sum((-1, -2)) * mvalid).sum() / max(mvalid.sum() * m2, 1),
    }


def loss(logits: np.ndarray, labels: tuple[np.ndarray, ...], cfg: dict) -> float:
    return float(sum(loss_terms(logits, labels, cfg).values()))
