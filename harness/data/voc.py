"""PASCAL VOC detection data (``VOCdevkit/VOC2007`` or ``VOC2012`` as distributed):
``Annotations/<id>.xml``, ``JPEGImages/<id>.jpg`` and ``ImageSets/Main/<split>.txt``.

For SSD (``objective == "detection"``) only.  Splits: training from
``trainval.txt`` (else ``train.txt``), held-out from ``test.txt`` (else
``val.txt`` when training read ``train.txt``).  Objects marked ``difficult``
are left out, as SSD's training does.  Labels are the 20 VOC classes in their
usual (alphabetical) order, 1..20, 0 being the background.  Box corners are
VOC's 1-based inclusive pixels, made fractions of the image: ((xmin - 1) / w,
(ymin - 1) / h, xmax / w, ymax / h).

Per step, each image is decoded with Pillow, warped to the model's square
input (SSD300 resizes without keeping the aspect ratio), flipped left-right
with probability 1/2 in training (its boxes with it), normalized with the
ImageNet mean and std (``imageops``), and its boxes matched to the priors
(``models.ssd.boxes.targets``): the loss receives targets, as with synthetic
data.  SSD's photometric distortions and random crops are not done.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import dlbench.harness.data.imageops as imageops
from dlbench.core.errors import UserError
from dlbench.harness.data.base import (
    Batch,
    Dataset,
    check_batch,
    epoch_indices,
    image_input,
    ordered_indices,
    to_layout,
)
from dlbench.models.registry import ModelSpec

CLASSES = (
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)
SPLITS = ("trainval", "train")  # training, first that exists


def looks_like(path: Path) -> bool:
    return (
        path.is_dir()
        and (path / "Annotations").is_dir()
        and (path / "JPEGImages").is_dir()
        and (path / "ImageSets" / "Main").is_dir()
    )


def parse_annotation(xml_path: Path, source: str) -> tuple[np.ndarray, np.ndarray]:
    """(corner boxes as fractions (n, 4) float32, labels 1..20 (n,)), difficult left out."""
    try:
        root = ET.parse(xml_path).getroot()
        w, h = (float(root.find(f"size/{k}").text) for k in ("width", "height"))
        boxes, labels = [], []
        for obj in root.iter("object"):
            diff = obj.find("difficult")
            if diff is not None and int(diff.text) == 1:
                continue
            name = obj.find("name").text.strip()
            if name not in CLASSES:
                raise UserError(f"{source}: {xml_path.name}: unknown class {name!r}")
            bb = obj.find("bndbox")
            x0, y0, x1, y1 = (float(bb.find(k).text) for k in ("xmin", "ymin", "xmax", "ymax"))
            boxes.append(((x0 - 1) / w, (y0 - 1) / h, x1 / w, y1 / h))
            labels.append(CLASSES.index(name) + 1)
    except (ET.ParseError, AttributeError, TypeError, ValueError) as exc:
        raise UserError(f"{source}: cannot read {xml_path} ({exc})") from None
    return np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int64)


class DetectionSet(Dataset):
    """What the VOC and COCO readers share: ``self.items[role]`` lists (image path,
    corner boxes as fractions, labels 1..K) per role ("train", "eval"); decoding,
    flipping, normalizing and matching happen per step in ``_batch``."""

    # What the data can train: COCO's masks also serve instance segmentation.
    objectives: tuple[str, ...] = ("detection",)

    def __init__(self, spec: ModelSpec, path: Path, classes: int):
        super().__init__(spec, path)
        source = self.describe_source()
        if spec.objective not in self.objectives:
            raise UserError(
                f"{source}: {' or '.join(self.objectives)} data, but {spec.name} trains {spec.objective!r}"
            )
        # Mask R-CNN's box inputs are made from the annotations: the image is the first.
        self.shape = (
            spec.inputs[0].shape if spec.objective == "instance-segmentation" else image_input(spec, source)
        )
        self.check_classes(source, classes + 1)
        self.splits: dict[str, str] = {}
        self.items: dict[str, list[tuple[Path, np.ndarray, np.ndarray]]] = {}

    def split_sizes(self) -> dict[str, int]:
        return {self.splits[r]: len(v) for r, v in self.items.items()}

    def _batch(self, items, rng, layout: str) -> Batch:
        from dlbench.models.ssd import boxes as ssd_boxes

        _, h, w = self.shape
        pixels = np.empty((len(items), h, w, 3), np.uint8)
        all_boxes, all_labels = [], []
        for k, (path, bx, lb) in enumerate(items):
            pixels[k] = self._decode(path)
            bx = bx.copy()
            if rng is not None and rng.random() < 0.5:
                pixels[k] = pixels[k, :, ::-1]
                bx[:, [0, 2]] = 1.0 - bx[:, [2, 0]]
            all_boxes.append(bx)
            all_labels.append(lb)
        targets = ssd_boxes.targets(self.spec.config, all_boxes, all_labels)
        return to_layout(normalized(pixels), layout), targets

    def _decode(self, path: Path) -> np.ndarray:
        """(H, W, 3) uint8: the image warped to the model's input (aspect not kept)."""
        from PIL import Image

        _, h, w = self.shape
        try:
            with Image.open(path) as img:
                return np.asarray(img.convert("RGB").resize((w, h), Image.BILINEAR))
        except OSError as exc:
            raise UserError(f"{self.describe_source()}: cannot decode {path} ({exc})") from None

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if not self.items:
            self.prepare()
        items = self.items["train"]
        check_batch(self, batch_size, len(items))
        rng = np.random.default_rng(seed)
        for idx in epoch_indices(len(items), batch_size, rng):
            yield self._batch([items[i] for i in idx], rng, layout)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        if not self.items:
            self.prepare()
        items = self.items["eval"]
        for idx in ordered_indices(len(items), batch_size, limit):
            yield self._batch([items[i] for i in idx], None, layout)


def normalized(pixels: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) uint8 -> (N, 3, H, W) float32 with the ImageNet mean and std."""
    images = pixels.transpose(0, 3, 1, 2).astype(np.float32) / 255.0
    return imageops.normalize(images, imageops.IMAGENET_MEAN, imageops.IMAGENET_STD)


class Voc(DetectionSet):
    format = "voc"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path, len(CLASSES))
        source = self.describe_source()
        if not looks_like(path):
            raise UserError(f"{source}: want Annotations/, JPEGImages/ and ImageSets/Main/")
        main = path / "ImageSets" / "Main"
        train = next((s for s in SPLITS if (main / f"{s}.txt").is_file()), None)
        if train is None:
            raise UserError(f"{source}: no ImageSets/Main/trainval.txt or train.txt")
        held = [
            s
            for s in ("test", "val")
            if (main / f"{s}.txt").is_file() and not (s == "val" and train == "trainval")
        ]
        self.splits = {"train": train, **({"eval": held[0]} if held else {})}
        self.eval_split = held[0] if held else None

    def no_eval_reason(self) -> str:
        return "no ImageSets/Main/test.txt (or val.txt beside train.txt)"

    def prepare(self) -> None:
        """Read every listed annotation once, before the clock."""
        source = self.describe_source()
        for role, split in self.splits.items():
            ids = (self.path / "ImageSets" / "Main" / f"{split}.txt").read_text().split()
            items = []
            for i in ids:
                jpg = self.path / "JPEGImages" / f"{i}.jpg"
                if not jpg.is_file():
                    raise UserError(f"{source}: {split}.txt lists {i}, but {jpg} is missing")
                items.append((jpg, *parse_annotation(self.path / "Annotations" / f"{i}.xml", source)))
            if not items:
                raise UserError(f"{source}: ImageSets/Main/{split}.txt lists no image")
            self.items[role] = items
