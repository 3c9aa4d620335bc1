"""ImageNet-style image folders: ``ROOT/train/<class>/*.JPEG`` with an optional
``ROOT/val/<class>/``, or a flat ``ROOT/<class>/*.jpg`` (training only).

Classes are the training split's sub-folders sorted by name; label = position
in that list (torchvision's ImageFolder rule), so a class's label does not
depend on which files are present.  Per step, each image is decoded with
Pillow and converted to RGB, then, as ResNet-50 training does:
  * train: a random-resized crop (area 8-100 %, aspect 3/4-4/3) resized to the
    model's input, and a random left-right flip;
  * eval: shorter side resized to size/0.875 (256 for 224) and a centre crop;
then pixels / 255 normalized with the ImageNet mean and std.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

import dlbench.harness.data.imageops as imageops
from dlbench.core.errors import UserError
from dlbench.harness.data.base import (
    Batch,
    Dataset,
    check_batch,
    class_image_input,
    epoch_indices,
    ordered_indices,
    to_layout,
)
from dlbench.models.registry import ModelSpec

EXTENSIONS = (".jpeg", ".jpg", ".png", ".bmp", ".ppm", ".webp")


def _is_image(p: Path) -> bool:
    return p.suffix.lower() in EXTENSIONS and p.is_file()


def _class_dirs(root: Path) -> list[Path]:
    return sorted(
        (d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")), key=lambda d: d.name
    )


def looks_like(path: Path) -> bool:
    if not path.is_dir():
        return False
    root = path / "train" if (path / "train").is_dir() else path
    return any(any(_is_image(f) for f in d.iterdir()) for d in _class_dirs(root))


class ImageFolder(Dataset):
    format = "imagefolder"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        source = self.describe_source()
        self.shape = class_image_input(spec, source)
        if self.shape[0] != 3:
            raise UserError(f"{source}: RGB images, but {spec.name} takes {self.shape[0]} channels")
        if not path.is_dir():
            raise UserError(
                f"{source}: not a directory (want ROOT/train/<class>/*.JPEG or ROOT/<class>/*.jpg)"
            )
        self.train_root = path / "train" if (path / "train").is_dir() else path
        val = path / "val"
        self.val_root = val if self.train_root != path and val.is_dir() else None
        self.classes = [d.name for d in _class_dirs(self.train_root)]
        if not self.classes:
            raise UserError(f"{source}: no class folders in {self.train_root}")
        self.check_classes(source, len(self.classes))
        self.eval_split = "val" if self.val_root else None
        self.files: dict[str, list[tuple[Path, int]]] = {}

    def no_eval_reason(self) -> str:
        return "no ROOT/val/<class>/ folders next to ROOT/train/"

    def _index(self, root: Path) -> list[tuple[Path, int]]:
        label = {name: i for i, name in enumerate(self.classes)}
        items = []
        for d in _class_dirs(root):
            if d.name not in label:
                raise UserError(f"{self.describe_source()}: {d} is a class the training split does not have")
            items += [(f, label[d.name]) for f in sorted(d.iterdir()) if _is_image(f)]
        if not items:
            raise UserError(f"{self.describe_source()}: no images ({', '.join(EXTENSIONS)}) under {root}")
        return items

    def prepare(self) -> None:
        """List every file once, before the clock (os.scandir over 1.28 M files is set-up)."""
        self.files["train"] = self._index(self.train_root)
        if self.val_root:
            self.files["val"] = self._index(self.val_root)

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.files.items()}

    def describe(self) -> dict:
        return {**super().describe(), "classes": len(self.classes)}

    def _load(self, items, boxes) -> np.ndarray:
        from PIL import Image

        _, h, w = self.shape
        out = np.empty((len(items), h, w, 3), np.uint8)
        for k, (path, _) in enumerate(items):
            try:
                with Image.open(path) as img:
                    img = img.convert("RGB")
                    out[k] = np.asarray(img.resize((w, h), Image.BILINEAR, box=boxes(img.width, img.height)))
            except OSError as exc:
                raise UserError(f"{self.describe_source()}: cannot decode {path} ({exc})") from None
        return out

    def _batch(self, items, boxes, flip_rng, layout: str) -> Batch:
        pixels = self._load(items, boxes).transpose(0, 3, 1, 2).astype(np.float32) / 255.0
        if flip_rng is not None:
            pixels = imageops.random_flip(pixels, flip_rng)
        images = imageops.normalize(pixels, imageops.IMAGENET_MEAN, imageops.IMAGENET_STD)
        return to_layout(images, layout), np.array([y for _, y in items], np.int32)

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if not self.files:
            self.prepare()
        items = self.files["train"]
        check_batch(self, batch_size, len(items))
        rng = np.random.default_rng(seed)
        crop = lambda w, h: imageops.random_resized_crop_box(w, h, rng)  # noqa: E731 - a one-line helper used right here
        for idx in epoch_indices(len(items), batch_size, rng):
            yield self._batch([items[i] for i in idx], crop, rng, layout)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        if not self.files:
            self.prepare()
        items = self.files["val"]
        _, h, w = self.shape
        crop = lambda iw, ih: imageops.center_crop_box(iw, ih, h, w)  # noqa: E731 - a one-line helper used right here
        for idx in ordered_indices(len(items), batch_size, limit):
            yield self._batch([items[i] for i in idx], crop, None, layout)
