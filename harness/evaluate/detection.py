"""Held-out scores of the two detectors, in float64 on the host like every tally in
``harness.evaluate.scoring`` (which maps their objectives to them):

* detection (SSD): the multibox training loss over the whole split (summed,
  divided by the split's positive priors) and, as the accuracy, the share of
  images whose single top detection (highest non-background softmax score over
  every prior, its box decoded) names a ground-truth object's class with IoU >=
  0.5 against that object's box; ``mean_top_iou`` is that IoU averaged over
  images (0 for a wrong class); and COCO's ``map`` (AP@[.5:.95]) and ``map50``
  of the full detection output (``models.ssd.boxes.detect``: per-class NMS,
  200 boxes an image), by ``harness.evaluate.average_precision``.  The ground
  truth is read back from the matched targets: every object owns at least its
  best prior, and the priors of one object decode to its box.
* instance-segmentation (Mask R-CNN, raw heads on the batch's given boxes): the
  training loss (``models.maskrcnn.reference``'s five terms, each reported too),
  averaged over images; as the accuracy, the box head's class accuracy on the
  foreground RoIs (arg-max over all classes equals the label); and ``mask_iou``,
  the mean IoU of each labelled mask box's predicted mask (its class's logits >= 0,
  i.e. probability >= 0.5) with its 28 x 28 target.  Cheap and selection-free, so an
  exported or INT8 network is scored on exactly what the trained one computed; the
  COCO AP of the full detect-then-segment pipeline is not computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class DetectionTally:
    """SSD: outputs (batch, priors, 4 + classes) raw heads, labels (class targets,
    box targets) as ``models.ssd.data`` makes them."""

    config: dict
    loss_sum: float = 0.0
    positives: int = 0
    correct: int = 0
    iou_sum: float = 0.0
    samples: int = 0
    detections: list = field(default_factory=list)
    truths: list = field(default_factory=list)

    def add(self, outputs, labels) -> None:
        from dlbench.models.ssd import boxes

        if isinstance(outputs, (tuple, list)):
            (outputs,) = outputs
        z = np.asarray(outputs, np.float64)
        cls_t, loc_t = (np.asarray(a, np.float64) for a in labels)
        total, pos = boxes.multibox_loss(z, cls_t, loc_t, self.config["neg_pos_ratio"])
        self.loss_sum, self.positives = self.loss_sum + total, self.positives + pos
        pri = boxes.priors_for(self.config).astype(np.float64)
        var = self.config["variances"]
        self.detections += boxes.detect(z, self.config)
        for zi, ci, li in zip(z, cls_t.astype(np.int64), loc_t):
            probs = boxes.softmax(zi[:, 4:])[:, 1:]
            best = np.unravel_index(np.argmax(probs), probs.shape)
            box = boxes.decode(zi[best[0], :4], pri[best[0]], var)
            own = ci == best[1] + 1  # priors matched to objects of that class
            truth = boxes.decode(li[own], pri[own], var)
            top = float(boxes.iou(box[None], truth).max()) if own.any() else 0.0
            self.correct += int(top >= 0.5)
            self.iou_sum += top
            self.samples += 1
            self.truths.append(_objects(boxes.decode(li[ci > 0], pri[ci > 0], var), ci[ci > 0]))

    def result(self) -> dict[str, float | int]:
        if not self.samples:
            raise RuntimeError("the held-out split gave no samples")
        from dlbench.harness.evaluate.average_precision import average_precision, summary

        return {
            "loss": self.loss_sum / max(self.positives, 1),
            "accuracy": self.correct / self.samples,
            "correct": self.correct,
            "samples": self.samples,
            "mean_top_iou": self.iou_sum / self.samples,
            **summary(average_precision(self.detections, self.truths)),
        }


def _objects(decoded: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An image's objects from its positive priors' decoded boxes: the priors matched to
    one object decode to its box up to rounding, so near-identical boxes are one."""
    from dlbench.models.ssd import boxes

    kept: list[int] = []
    for i in range(len(decoded)):
        same = [j for j in kept if classes[j] == classes[i]]
        if not same or boxes.iou(decoded[i : i + 1], decoded[same]).max() < 0.999:
            kept.append(i)
    return decoded[kept], classes[kept]


@dataclass
class InstanceSegmentationTally:
    """Mask R-CNN: outputs (batch, L) (``models.maskrcnn.output_layout``), labels the six
    arrays ``models.maskrcnn.boxes`` makes."""

    config: dict
    loss_sum: float = 0.0
    terms: dict = field(default_factory=dict)
    correct: int = 0
    foreground: int = 0
    iou_sum: float = 0.0
    masks: int = 0
    samples: int = 0

    def add(self, outputs, labels) -> None:
        from dlbench.models import maskrcnn
        from dlbench.models.maskrcnn import reference

        if isinstance(outputs, (tuple, list)):
            (outputs,) = outputs
        z = np.asarray(outputs, np.float64)
        width = maskrcnn.output_width(self.config)
        if z.ndim != 2 or z.shape[1] != width:
            raise ValueError(f"outputs of shape {list(z.shape)}; expected (batch, {width})")
        labels = tuple(np.asarray(a, np.float64) for a in labels)
        b = len(z)
        for name, value in reference.loss_terms(z, labels, self.config).items():
            self.terms[name] = self.terms.get(name, 0.0) + value * b
            self.loss_sum += value * b
        parts = maskrcnn.split_output(self.config, z)
        c = self.config["num_classes"]
        roi_labels = labels[2].astype(np.int64)
        fg = roi_labels > 0
        self.correct += int((parts["box"][..., :c].argmax(-1) == roi_labels)[fg].sum())
        self.foreground += int(fg.sum())
        classes = labels[4].astype(np.int64)
        picked = np.take_along_axis(parts["mask"], classes[:, :, None, None, None], 2)[:, :, 0]
        pred, truth = picked >= 0, labels[5] >= 0.5
        union = (pred | truth).sum((-1, -2))
        iou = np.where(union > 0, (pred & truth).sum((-1, -2)) / np.maximum(union, 1), 1.0)
        self.iou_sum += float(iou[classes > 0].sum())
        self.masks += int((classes > 0).sum())
        self.samples += b

    def result(self) -> dict[str, float | int]:
        if not self.samples:
            raise RuntimeError("the held-out split gave no samples")
        return {
            "loss": self.loss_sum / self.samples,
            "accuracy": self.correct / self.foreground if self.foreground else None,
            "correct": self.correct,
            "samples": self.samples,
            "foreground_rois": self.foreground,
            "mask_iou": self.iou_sum / self.masks if self.masks else None,
            "mask_boxes": self.masks,
            "loss_terms": {k: v / self.samples for k, v in self.terms.items()},
        }
