"""COCO detection data: ``ROOT/annotations/instances_<split>.json`` and the images in
``ROOT/<split>/`` (``train2017``/``val2017`` as distributed).

For SSD (``objective == "detection"``), through ``voc.DetectionSet`` (the
same per-step decoding, flip, normalization and matching), and for Mask R-CNN
(``"instance-segmentation"``), which also reads each object's ``segmentation``
(``segmentation``: polygons, uncompressed or compressed RLE; one that does not
decode is refused by name while the annotations are read).  Splits: training from the first
``instances_train*.json``, held-out from ``instances_val*.json``.  Labels are
the json's categories sorted by id, 1..K (COCO's 80 ids run to 90 with gaps, so
they are renumbered); a model needs K + 1 outputs, so the VOC SSD300 (21)
refuses the full 80-class set with that reason.  ``iscrowd`` regions are left
out, as SSD's and Detectron's training do; ``bbox`` is (x, y, width, height) in
pixels, made corner fractions of the image (Mask R-CNN also leaves out boxes
without area, as Detectron2 does).

A Mask R-CNN batch: each image warped to the model's square input (as SSD's; the
paper resizes the short side to 800 and keeps the aspect ratio, which a fixed
input shape cannot), flipped left-right with probability 1/2 in training with its
boxes and masks, ImageNet-normalized; the masks drawn at the input's size
(``segmentation``) and the targets made by ``models.maskrcnn.boxes.batch_targets``:
``((images, rois, mask_rois), six labels)``, as the synthetic data gives.  The
held-out split's RoI sampling is seeded (``EVAL_SEED``), so its score is repeatable.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import dlbench.harness.data.segmentation as segmentation
from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, to_layout
from dlbench.harness.data.voc import DetectionSet, normalized
from dlbench.models.registry import ModelSpec

EVAL_SEED = 0


def _annotation_files(path: Path, prefix: str) -> list[Path]:
    return sorted((path / "annotations").glob(f"instances_{prefix}*.json"))


def looks_like(path: Path) -> bool:
    return path.is_dir() and bool(_annotation_files(path, "train"))


def _read(path: Path, source: str) -> dict:
    try:
        data = json.loads(path.read_text())
        data["images"], data["annotations"], data["categories"]
        return data
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{source}: cannot read {path} ({exc})") from None


class Coco(DetectionSet):
    format = "coco"
    objectives = ("detection", "instance-segmentation")

    def __init__(self, spec: ModelSpec, path: Path):
        source = f"--data coco:{path}"
        if not looks_like(path):
            raise UserError(f"{source}: want annotations/instances_train*.json")
        self.files = {"train": _annotation_files(path, "train")[0]}
        held = _annotation_files(path, "val")
        if held:
            self.files["eval"] = held[0]
        first = _read(self.files["train"], source)
        self.category = {
            c["id"]: k + 1 for k, c in enumerate(sorted(first["categories"], key=lambda c: c["id"]))
        }
        super().__init__(spec, path, len(self.category))
        self.splits = {r: f.stem.removeprefix("instances_") for r, f in self.files.items()}
        self.eval_split = self.splits.get("eval")
        self._first = first

    @property
    def masks(self) -> bool:
        return self.spec.objective == "instance-segmentation"

    def _batch(self, items, rng, layout: str) -> Batch:
        if not self.masks:
            return super()._batch(items, rng, layout)
        from dlbench.models.maskrcnn import boxes as mrcnn_boxes

        size = self.shape[-1]
        pixels = np.empty((len(items), size, size, 3), np.uint8)
        scenes = []
        for k, (path, bx, lb, (segs, w, h)) in enumerate(items):
            pixels[k] = self._decode(path)
            masks = np.asarray([segmentation.instance_mask(s, w, h, size) for s in segs], np.float32).reshape(
                -1, size, size
            )
            bx = bx.astype(np.float64) * size
            if rng is not None and rng.random() < 0.5:
                pixels[k] = pixels[k, :, ::-1]
                masks = masks[:, :, ::-1]
                bx[:, [0, 2]] = size - bx[:, [2, 0]]
            scenes.append((bx, lb, masks))
        sampler = rng if rng is not None else np.random.default_rng(EVAL_SEED)
        (rois, mask_rois), labels = mrcnn_boxes.batch_targets(self.spec.config, scenes, sampler)
        return (to_layout(normalized(pixels), layout), rois, mask_rois), labels

    def no_eval_reason(self) -> str:
        return "no annotations/instances_val*.json"

    def prepare(self) -> None:
        """Read the annotation files once, before the clock."""
        source = self.describe_source()
        for role, file in self.files.items():
            data = self._first if role == "train" else _read(file, source)
            per_image: dict[int, list] = {}
            for a in data["annotations"]:
                if not a.get("iscrowd", 0):
                    per_image.setdefault(a["image_id"], []).append(a)
            items = []
            for img in data["images"]:
                jpg = self.path / self.splits[role] / img["file_name"]
                if not jpg.is_file():
                    raise UserError(f"{source}: {file.name} lists {img['file_name']}, but {jpg} is missing")
                w, h = float(img["width"]), float(img["height"])
                objs = per_image.get(img["id"], [])
                if self.masks:
                    objs = [a for a in objs if a["bbox"][2] > 0 and a["bbox"][3] > 0]
                    for a in objs:
                        why = segmentation.problem(a.get("segmentation"))
                        if why:
                            raise UserError(
                                f"{source}: {file.name}: annotation {a.get('id')} "
                                f"of {img['file_name']}: {why}"
                            )
                try:
                    labels = np.asarray([self.category[a["category_id"]] for a in objs], np.int64)
                except KeyError as exc:
                    raise UserError(f"{source}: {file.name}: unknown category {exc}") from None
                xywh = np.asarray([a["bbox"] for a in objs], np.float64).reshape(-1, 4)
                boxes = np.stack(
                    [
                        xywh[:, 0] / w,
                        xywh[:, 1] / h,
                        (xywh[:, 0] + xywh[:, 2]) / w,
                        (xywh[:, 1] + xywh[:, 3]) / h,
                    ],
                    1,
                ).astype(np.float32)
                if self.masks:
                    items.append((jpg, boxes, labels, ([a["segmentation"] for a in objs], w, h)))
                else:
                    items.append((jpg, boxes, labels))
            if not items:
                raise UserError(f"{source}: {file.name} lists no image")
            self.items[role] = items
