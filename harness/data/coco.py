"""COCO detection data: ``ROOT/annotations/instances_<split>.json`` and the images in
``ROOT/<split>/`` (``train2017``/``val2017`` as distributed).

For SSD (``objective == "detection"``) only, through ``voc.DetectionSet`` (the
same per-step decoding, flip, normalization and matching).  Splits: training
from the first ``instances_train*.json``, held-out from ``instances_val*.json``.
Labels are the json's categories sorted by id, 1..K (COCO's 80 ids run to 90
with gaps, so they are renumbered); a model needs K + 1 outputs, so the VOC
SSD300 (21) refuses the full 80-class set with that reason.  ``iscrowd``
regions are left out, as SSD's training does; ``bbox`` is (x, y, width, height)
in pixels, made corner fractions of the image.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dlbench.harness.data.voc import DetectionSet
from dlbench.models.errors import UserError
from dlbench.models.registry import ModelSpec


def _annotation_files(path: Path, prefix: str) -> list[Path]:
    return sorted((path / "annotations").glob(f"instances_{prefix}*.json"))


def looks_like(path: Path) -> bool:
    return path.is_dir() and bool(_annotation_files(path, "train"))


def _read(path: Path, source: str) -> dict:
    try:
        data = json.loads(path.read_text())
        data["images"], data["annotations"], data["categories"]   # noqa: B018
        return data
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{source}: cannot read {path} ({exc})") from None


class Coco(DetectionSet):
    format = "coco"

    def __init__(self, spec: ModelSpec, path: Path):
        source = f"--data coco:{path}"
        if not looks_like(path):
            raise UserError(f"{source}: want annotations/instances_train*.json")
        self.files = {"train": _annotation_files(path, "train")[0]}
        held = _annotation_files(path, "val")
        if held:
            self.files["eval"] = held[0]
        first = _read(self.files["train"], source)
        self.category = {c["id"]: k + 1 for k, c in
                         enumerate(sorted(first["categories"], key=lambda c: c["id"]))}
        super().__init__(spec, path, len(self.category))
        self.splits = {r: f.stem.removeprefix("instances_") for r, f in self.files.items()}
        self.eval_split = self.splits.get("eval")
        self._first = first

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
                    raise UserError(f"{source}: {file.name} lists {img['file_name']}, but "
                                    f"{jpg} is missing")
                w, h = float(img["width"]), float(img["height"])
                objs = per_image.get(img["id"], [])
                try:
                    labels = np.asarray([self.category[a["category_id"]] for a in objs], np.int64)
                except KeyError as exc:
                    raise UserError(f"{source}: {file.name}: unknown category {exc}") from None
                xywh = np.asarray([a["bbox"] for a in objs], np.float64).reshape(-1, 4)
                boxes = np.stack([xywh[:, 0] / w, xywh[:, 1] / h, (xywh[:, 0] + xywh[:, 2]) / w,
                                  (xywh[:, 1] + xywh[:, 3]) / h], 1).astype(np.float32)
                items.append((jpg, boxes, labels))
            if not items:
                raise UserError(f"{source}: {file.name} lists no image")
            self.items[role] = items
