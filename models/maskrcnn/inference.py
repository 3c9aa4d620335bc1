"""Mask R-CNN's inference post-processing in numpy, outside the graph (Detectron2's
test-time rules): the RPN's outputs become proposals (the next run's ``rois``), the
box head's become detections (the next run's ``mask_rois``), and the mask head's
28 x 28 logits are pasted into the image.

A full inference is therefore three network runs around the numpy steps: run the
network on the image with any boxes and read the RPN part; ``proposals`` -> run with
those as ``rois`` and read the box part; ``detections`` -> run with those as
``mask_rois`` and read the mask part; ``paste_masks`` (three backbone passes where a
fused two-stage graph makes one: ``benchmarks/detection_postprocess.py`` times
it).  Selection (top-k, NMS) stays here so that every framework, export and
precision is compared on the raw heads.
"""

from __future__ import annotations

import numpy as np

from dlbench.models import maskrcnn as M
from dlbench.models.maskrcnn import boxes as B
from dlbench.models.maskrcnn import reference
from dlbench.models.ssd.boxes import softmax

PRE_NMS_PER_LEVEL = 1000  # Detectron2's test-time pre-NMS top-k, per level
RPN_NMS = 0.7
MIN_SIZE = 1e-3  # proposals narrower or lower than this (pixels) are dropped
SCORE_THRESHOLD = 0.05
BOX_NMS = 0.5


def rpn_outputs(cfg: dict, logits: np.ndarray) -> np.ndarray:
    """(batch, anchors, 5) of a (batch, L) output: objectness, then dx, dy, dw, dh, in
    ``boxes.anchors`` order."""
    parts = M.split_output(cfg, np.asarray(logits))
    b = len(logits)
    return np.concatenate([parts[f"rpn.p{lv}"].reshape(b, -1, 5) for lv in M.LEVELS], 1)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def proposals(rpn: np.ndarray, cfg: dict, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(boxes (batch, count, 4) float32, objectness probabilities (batch, count)) from
    ``rpn`` (batch, anchors, 5): per level the ``PRE_NMS_PER_LEVEL`` best anchors are
    decoded, clipped to the image, tiny boxes dropped and NMS'd at 0.7; the best
    ``count`` over all levels are kept, best first, padded with empty boxes scored 0."""
    anc, levels = B.anchors_for(cfg), B.anchor_levels(cfg)
    size = float(cfg["image_size"])
    rpn = np.asarray(rpn, np.float64)
    out_boxes = np.zeros((len(rpn), count, 4), np.float32)
    out_scores = np.zeros((len(rpn), count), np.float32)
    for i, z in enumerate(rpn):
        found_boxes, found_scores = [], []
        for level in M.LEVELS:
            idx = np.flatnonzero(levels == level)
            if len(idx) > PRE_NMS_PER_LEVEL:
                idx = idx[np.argpartition(-z[idx, 0], PRE_NMS_PER_LEVEL)[:PRE_NMS_PER_LEVEL]]
            boxes = B.clip(B.decode(z[idx, 1:], anc[idx], B.RPN_WEIGHTS), size)
            wide = (boxes[:, 2:] - boxes[:, :2] > MIN_SIZE).all(1)
            boxes, scores = boxes[wide], z[idx[wide], 0]
            keep = B.nms(boxes, scores, RPN_NMS, top_k=count)
            found_boxes.append(boxes[keep])
            found_scores.append(scores[keep])
        boxes, scores = np.concatenate(found_boxes), np.concatenate(found_scores)
        best = np.argsort(-scores, kind="stable")[:count]
        out_boxes[i, : len(best)] = boxes[best]
        out_scores[i, : len(best)] = _sigmoid(scores[best])
    return out_boxes, out_scores


def detections(
    box: np.ndarray, rois: np.ndarray, cfg: dict, count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(boxes (batch, count, 4) float32, scores (batch, count), classes (batch, count)
    int, 0 = padding) from the box head's part (batch, R, C + 4C) on ``rois``: softmax,
    each class's deltas decoded on its RoI with ``box_weights`` and clipped, scores
    above 0.05 kept, NMS at 0.5 per class, the best ``count`` over classes."""
    c, size = cfg["num_classes"], float(cfg["image_size"])
    box = np.asarray(box, np.float64)
    rois = np.asarray(rois, np.float64)
    b = len(box)
    probs = softmax(box[..., :c])
    deltas = box[..., c:].reshape(b, -1, c, 4)
    out = (
        np.zeros((b, count, 4), np.float32),
        np.zeros((b, count), np.float32),
        np.zeros((b, count), np.int64),
    )
    for i in range(b):
        decoded = B.clip(B.decode(deltas[i], rois[i][:, None, :], cfg["box_weights"]), size)
        found = []
        for k in range(1, c):
            idx = np.flatnonzero((probs[i, :, k] > SCORE_THRESHOLD) & (B.area(decoded[:, k]) > 0))
            keep = idx[B.nms(decoded[idx, k], probs[i, idx, k], BOX_NMS, top_k=count)]
            found += [(probs[i, j, k], k, decoded[j, k]) for j in keep]
        found.sort(key=lambda t: -t[0])
        for n, (score, k, bx) in enumerate(found[:count]):
            out[0][i, n], out[1][i, n], out[2][i, n] = bx, score, k
    return out


def paste_masks(
    mask_logits: np.ndarray, boxes: np.ndarray, classes: np.ndarray, image_size: int
) -> np.ndarray:
    """(D, S, S) bool masks of one image: each detection's class map (D, C, 28, 28)
    through a sigmoid, read bilinearly at the centres of the pixels inside its box
    (the box spans the map's 28 cells, as RoIAlign read it), >= 0.5; class 0 (padding)
    gives an empty mask."""
    logits = np.asarray(mask_logits, np.float64)
    m = logits.shape[-1]
    out = np.zeros((len(boxes), image_size, image_size), bool)
    for k, (box, c) in enumerate(zip(np.asarray(boxes, np.float64), classes)):
        x0, y0, x1, y1 = box
        if c <= 0 or x1 <= x0 or y1 <= y0:
            continue
        cols = np.arange(max(int(np.floor(x0)), 0), min(int(np.ceil(x1)), image_size))
        rows = np.arange(max(int(np.floor(y0)), 0), min(int(np.ceil(y1)), image_size))
        cols = cols[(cols + 0.5 > x0) & (cols + 0.5 < x1)]
        rows = rows[(rows + 0.5 > y0) & (rows + 0.5 < y1)]
        if not len(cols) or not len(rows):
            continue
        u = (cols + 0.5 - x0) / (x1 - x0) * m - 0.5
        v = (rows + 0.5 - y0) / (y1 - y0) * m - 0.5
        vv, uu = np.meshgrid(v, u, indexing="ij")
        prob = _sigmoid(logits[k, int(c)])[None]
        inside = reference.bilinear(prob, vv, uu)[0] >= 0.5
        out[k, rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1] = inside
    return out
