"""COCO's box average precision in numpy, for a detector's held-out score.

The figure detection papers report: per class and IoU threshold (0.50, 0.55, ...,
0.95), each image's detections of that class, best first and at most 100, are
matched greedily to the unmatched ground-truth box they overlap most (IoU at least
the threshold); over all images, the precision envelope is read at 101 recall
points and averaged; AP@[.5:.95] is the mean over thresholds and over the
classes that have ground truth, AP50 the mean at 0.50 alone.  This is
pycocotools' COCOeval for the "all" area range, without crowd regions (the
readers leave crowds out), and tests/models/test_ssd.py checks it equals COCOeval on
random scenes.  Written here rather than calling pycocotools, which is not a
dependency of dlbench's runtime.
"""

from __future__ import annotations

import numpy as np

IOU_THRESHOLDS = np.round(np.linspace(0.5, 0.95, 10), 2)
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
MAX_DETECTIONS = 100  # per image and class, as COCO's headline figures


def _matches(det: np.ndarray, gt: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(thresholds, len(det)) bool: whether each detection (best first) takes a box."""
    from dlbench.models.ssd.boxes import iou

    hit = np.zeros((len(thresholds), len(det)), bool)
    if not len(det) or not len(gt):
        return hit
    overlap = iou(det, gt)
    for t, threshold in enumerate(thresholds):
        taken = np.zeros(len(gt), bool)
        for d in range(len(det)):
            # The free box it overlaps most, at least the threshold (ties: the last, as
            # COCOeval's scan keeps the last of equals).
            free = np.where(taken, -1.0, overlap[d])
            g = len(free) - 1 - int(np.argmax(free[::-1]))
            if free[g] >= min(threshold, 1 - 1e-10):
                taken[g] = hit[t, d] = True
    return hit


def _precision_at_recall(hit: np.ndarray, scores: np.ndarray, truths: int) -> np.ndarray:
    """(thresholds,) AP of one class from every image's matches and scores."""
    order = np.argsort(-scores, kind="mergesort")
    tp = np.cumsum(hit[:, order], 1)
    fp = np.cumsum(~hit[:, order], 1)
    out = np.zeros(len(hit))
    for t in range(len(hit)):
        recall = tp[t] / truths
        precision = tp[t] / np.maximum(tp[t] + fp[t], np.spacing(1))
        envelope = np.maximum.accumulate(precision[::-1])[::-1]
        at = np.searchsorted(recall, RECALL_POINTS, side="left")
        reached = at < len(envelope)  # recall points past the last: precision 0
        q = np.zeros(len(RECALL_POINTS))
        q[reached] = envelope[at[reached]]
        out[t] = q.mean()
    return out


def average_precision(
    detections, truths, thresholds=IOU_THRESHOLDS, max_detections: int = MAX_DETECTIONS
) -> dict[int, np.ndarray]:
    """{class: AP at each IoU threshold} for the classes with ground truth.

    ``detections``: per image (boxes (n, 4) corners, scores (n,), classes (n,));
    ``truths``: per image (boxes (m, 4), classes (m,)).  Any box units, the same on
    both sides."""
    present = sorted({int(c) for _, classes in truths for c in classes})
    result = {}
    for k in present:
        hits, scores, count = [], [], 0
        for (db, ds, dc), (gb, gc) in zip(detections, truths):
            mine = np.flatnonzero(np.asarray(dc) == k)
            mine = mine[np.argsort(-np.asarray(ds)[mine], kind="mergesort")][:max_detections]
            gt = np.asarray(gb, np.float64).reshape(-1, 4)[np.asarray(gc) == k]
            count += len(gt)
            hits.append(_matches(np.asarray(db, np.float64).reshape(-1, 4)[mine], gt, thresholds))
            scores.append(np.asarray(ds, np.float64)[mine])
        result[k] = _precision_at_recall(np.concatenate(hits, 1), np.concatenate(scores), count)
    return result


def summary(per_class: dict[int, np.ndarray]) -> dict[str, float | None]:
    """AP@[.5:.95] and AP50 over the classes with ground truth (None without any)."""
    if not per_class:
        return {"map": None, "map50": None}
    table = np.stack(list(per_class.values()))  # (classes, thresholds)
    return {"map": float(table.mean()), "map50": float(table[:, 0].mean())}
