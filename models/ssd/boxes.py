"""SSD's box arithmetic in numpy, in one place: default boxes (priors), matching,
encoding, decoding, NMS and the multibox loss used as the held-out reference.

Boxes are fractions of the image.  Priors are (cx, cy, w, h); ground truth and
detections are corners (xmin, ymin, xmax, ymax).  Matching happens when a batch
is made (before the clock), so every framework's loss receives per-prior class
targets and encoded box targets and only has to compute the loss.
"""

from __future__ import annotations

import functools

import numpy as np

from dlbench.models.ssd import sources


def priors(cfg: dict) -> np.ndarray:
    """(priors, 4) float32 (cx, cy, w, h), in (map, row, column, box) order; the boxes
    of a cell: min-scale square, sqrt(min * max) square, then each aspect ratio r in
    (2, 3)[:n] as (s * sqrt(r), s / sqrt(r)) followed by its transpose."""
    out = []
    for k, (_, _, f, a) in enumerate(sources(cfg)):
        s, big = cfg["min_scales"][k], np.sqrt(cfg["min_scales"][k] * cfg["max_scales"][k])
        shapes = [(s, s), (big, big)]
        for r in (2.0, 3.0)[: (a - 2) // 2]:
            shapes += [(s * np.sqrt(r), s / np.sqrt(r)), (s / np.sqrt(r), s * np.sqrt(r))]
        centre = (np.arange(f) + 0.5) / f
        cy, cx = np.meshgrid(centre, centre, indexing="ij")  # row-major cells
        wh = np.asarray(shapes)  # (a, 2)
        grid = np.stack([cx, cy], -1).reshape(-1, 1, 2).repeat(a, 1)
        out.append(np.concatenate([grid, np.broadcast_to(wh, grid.shape)], -1).reshape(-1, 4))
    return np.concatenate(out).astype(np.float32)


@functools.lru_cache(maxsize=8)
def _cached(key: tuple) -> np.ndarray:
    return priors(dict(key))


def priors_for(cfg: dict) -> np.ndarray:
    """``priors(cfg)``, computed once per configuration."""
    return _cached(tuple(sorted((k, v) for k, v in cfg.items())))


def corners(b: np.ndarray) -> np.ndarray:
    return np.concatenate([b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2], -1)


def centres(b: np.ndarray) -> np.ndarray:
    return np.concatenate([(b[..., :2] + b[..., 2:]) / 2, b[..., 2:] - b[..., :2]], -1)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a), len(b)) intersection over union of corner boxes; an inverted box is
    empty, and two empty boxes overlap 0.  Shared with Mask R-CNN
    (``models.maskrcnn.boxes``): fractions or pixels alike."""
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(-1)
    area = lambda x: np.clip(x[:, 2:] - x[:, :2], 0, None).prod(-1)  # noqa: E731 - a one-line helper used right here
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def encode(gt: np.ndarray, pri: np.ndarray, variances=(0.1, 0.2)) -> np.ndarray:
    """Regression targets of corner boxes ``gt`` against priors ``pri`` (same length)."""
    g = centres(gt)
    return np.concatenate(
        [
            (g[:, :2] - pri[:, :2]) / (variances[0] * pri[:, 2:]),
            np.log(np.maximum(g[:, 2:], 1e-8) / pri[:, 2:]) / variances[1],
        ],
        -1,
    )


def decode(loc: np.ndarray, pri: np.ndarray, variances=(0.1, 0.2)) -> np.ndarray:
    """Corner boxes from regressions ``loc`` (..., priors, 4)."""
    c = pri[..., :2] + loc[..., :2] * variances[0] * pri[..., 2:]
    wh = pri[..., 2:] * np.exp(loc[..., 2:] * variances[1])
    return corners(np.concatenate([c, wh], -1))


def match(
    gt: np.ndarray, labels: np.ndarray, pri: np.ndarray, threshold: float = 0.5, variances=(0.1, 0.2)
) -> tuple[np.ndarray, np.ndarray]:
    """(class per prior (0 = background), encoded box per prior) for one image: a prior
    takes the ground-truth box it overlaps most if that IoU >= ``threshold``, and each
    ground-truth box also takes its own best prior (the paper's bipartite step)."""
    n = len(pri)
    if len(gt) == 0:
        return np.zeros(n, np.float32), np.zeros((n, 4), np.float32)
    overlap = iou(np.asarray(gt, np.float64), corners(pri.astype(np.float64)))
    best_gt, best_iou = overlap.argmax(0), overlap.max(0)
    best_prior = overlap.argmax(1)
    best_iou[best_prior] = 2.0
    best_gt[best_prior] = np.arange(len(gt))
    cls = np.where(best_iou >= threshold, np.asarray(labels)[best_gt], 0)
    loc = encode(np.asarray(gt, np.float64)[best_gt], pri, variances)
    return cls.astype(np.float32), np.where(cls[:, None] > 0, loc, 0).astype(np.float32)


def targets(cfg: dict, boxes: list, labels: list) -> tuple[np.ndarray, np.ndarray]:
    """Batched ``match``: (class targets (B, P) float32, box targets (B, P, 4))."""
    pri = priors_for(cfg)
    pairs = [match(b, lab, pri, cfg["iou_threshold"], cfg["variances"]) for b, lab in zip(boxes, labels)]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


# Candidates up to which NMS holds their whole IoU matrix (its float64 temporaries are
# 16 x N^2 bytes: 16 MB at 1024); past it, one IoU row per kept box.
NMS_MATRIX = 1024


def nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    threshold: float = 0.45,
    candidates: int | None = None,
    top_k: int | None = None,
) -> np.ndarray:
    """Indices kept by greedy non-maximum suppression (IoU > ``threshold`` with a kept
    box suppresses), best first, ties to the lower index.  The two caps are the two
    detectors' recipes: SSD's DetectionOutput suppresses among its ``candidates`` best
    boxes; Detectron stops once ``top_k`` boxes are kept."""
    order = np.argsort(-scores, kind="stable")[:candidates]
    boxes = boxes[order]
    # One IoU matrix instead of one IoU row per kept box: the per-call overhead of the
    # rows made an untrained SSD's 20 classes x 200 candidates 0.15 s an image.
    over = iou(boxes, boxes) > threshold if len(order) <= NMS_MATRIX else None
    alive = np.ones(len(order), bool)
    keep = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(order[i])
        if top_k is not None and len(keep) >= top_k:
            break
        alive &= ~(over[i] if over is not None else iou(boxes[i : i + 1], boxes)[0] > threshold)
    return np.asarray(keep, np.int64)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def detect(
    logits: np.ndarray,
    cfg: dict,
    score_threshold: float = 0.01,
    nms_threshold: float = 0.45,
    top_k: int = 200,
) -> list[tuple[np.ndarray, ...]]:
    """Per image (boxes (n, 4) corners, scores (n,), classes (n,)), best first: the
    network's raw ``logits`` decoded, softmaxed and suppressed per class (outside the
    graph, as the released SSD's DetectionOutput layer does)."""
    pri = priors_for(cfg).astype(np.float64)
    logits = np.asarray(logits, np.float64)
    out = []
    for z in logits:
        boxes, probs = decode(z[:, :4], pri, cfg["variances"]), softmax(z[:, 4:])
        found = []
        for c in range(1, probs.shape[1]):
            idx = np.flatnonzero(probs[:, c] > score_threshold)
            for i in idx[nms(boxes[idx], probs[idx, c], nms_threshold, candidates=top_k)]:
                found.append((probs[i, c], c, boxes[i]))
        found.sort(key=lambda t: -t[0])
        found = found[:top_k]
        out.append(
            (
                np.asarray([f[2] for f in found]).reshape(-1, 4),
                np.asarray([f[0] for f in found]),
                np.asarray([f[1] for f in found], int),
            )
        )
    return out


def multibox_loss(
    logits: np.ndarray, cls_t: np.ndarray, loc_t: np.ndarray, neg_pos_ratio: int = 3
) -> tuple[float, int]:
    """(summed loss, positives) of a batch, as every framework's loss computes it:
    smooth-L1 on positive priors + cross-entropy on positives and on each image's
    ``neg_pos_ratio`` x positives hardest negatives (background loss at or above the
    k-th largest); the training loss divides the sum by the positives."""
    z = np.asarray(logits, np.float64)
    y = np.asarray(cls_t).astype(np.int64)
    pos = y > 0
    top = z[..., 4:].max(-1, keepdims=True)
    lse = top[..., 0] + np.log(np.exp(z[..., 4:] - top).sum(-1))
    ce = lse - np.take_along_axis(z[..., 4:], y[..., None], -1)[..., 0]
    d = np.abs(z[..., :4] - loc_t)
    smooth = np.where(d < 1, 0.5 * d * d, d - 0.5).sum(-1)
    mining = np.where(pos, 0.0, lse - z[..., 4])
    k = np.minimum(neg_pos_ratio * pos.sum(1), pos.shape[1] - pos.sum(1))
    ranked = -np.sort(-mining, axis=1)
    kth = np.take_along_axis(ranked, np.maximum(k - 1, 0)[:, None], 1)
    neg = (mining >= kth) & (k[:, None] > 0) & ~pos
    total = (ce * (pos | neg)).sum() + (smooth * pos).sum()
    return float(total), int(pos.sum())
