"""CIFAR-10 in its binary distribution (``cifar-10-batches-bin``).

Each ``*.bin`` file is a run of 3,073-byte records: one label byte (0-9), then
a 32x32 image as 1,024 red, 1,024 green and 1,024 blue bytes (CHW, row-major).
Training split: every ``data_batch_*.bin``; held-out split: ``test_batch.bin``.
The files are memory-mapped and each step gathers its records from them, so a
step's data time includes reading the bytes (from the page cache once warm).

Per step: pixels / 255, normalized with CIFAR-10's per-channel mean and std;
training batches get the usual 4-pixel pad + random crop and a random
left-right flip.  A model whose input is not 32x32 gets the images resized
bilinearly to its input size (resnet50-mini: 64x64), after augmentation.
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

RECORD = 1 + 3 * 32 * 32
CLASSES = 10
TRAIN_GLOB = "data_batch_*.bin"
TEST_FILE = "test_batch.bin"
PAD = 4


def looks_like(path: Path) -> bool:
    return path.is_dir() and (
        any(path.glob(TRAIN_GLOB)) or any((path / "cifar-10-batches-bin").glob(TRAIN_GLOB))
    )


class Cifar10(Dataset):
    format = "cifar10"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        source = self.describe_source()
        self.shape = class_image_input(spec, source)
        if self.shape[0] != 3:
            raise UserError(f"{source}: RGB images, but {spec.name} takes {self.shape[0]} channels")
        self.check_classes(source, CLASSES)
        if not path.is_dir():
            raise UserError(f"{source}: not a directory (want data_batch_*.bin and test_batch.bin)")
        if not any(path.glob(TRAIN_GLOB)) and (path / "cifar-10-batches-bin").is_dir():
            path = self.path = path / "cifar-10-batches-bin"
        self.train_files = sorted(path.glob(TRAIN_GLOB))
        if not self.train_files:
            raise UserError(f"{source}: no {TRAIN_GLOB} files in the directory")
        test = path / TEST_FILE
        self.test_files = [test] if test.is_file() else []
        self.eval_split = "test" if self.test_files else None
        self.counts = {f: self._records(f) for f in self.train_files + self.test_files}

    def _records(self, f: Path) -> int:
        size = f.stat().st_size
        if size == 0 or size % RECORD:
            raise UserError(
                f"{self.describe_source()}: {f.name} is {size} bytes, not a whole "
                f"number of {RECORD}-byte CIFAR-10 records"
            )
        return size // RECORD

    def no_eval_reason(self) -> str:
        return f"no {TEST_FILE}"

    def split_sizes(self) -> dict[str, int]:
        sizes = {"train": sum(self.counts[f] for f in self.train_files)}
        if self.test_files:
            sizes["test"] = sum(self.counts[f] for f in self.test_files)
        return sizes

    def _open(self, files: list[Path]) -> np.ndarray:
        """One (N, 3073) uint8 view over ``files``: memory maps, concatenated lazily."""
        maps = [np.memmap(f, np.uint8, "r", shape=(self.counts[f], RECORD)) for f in files]
        return maps[0] if len(maps) == 1 else _Concat(maps)

    def _decode(self, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        labels = records[:, 0].astype(np.int32)
        if labels.max(initial=0) >= CLASSES:
            raise UserError(
                f"{self.describe_source()}: label {labels.max()} outside 0-9 (not a CIFAR-10 file?)"
            )
        images = records[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
        return imageops.normalize(images, imageops.CIFAR_MEAN, imageops.CIFAR_STD), labels

    def _finish(self, images: np.ndarray, layout: str) -> np.ndarray:
        return to_layout(imageops.resize(images, *self.shape[1:]), layout)

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        data = self._open(self.train_files)
        check_batch(self, batch_size, len(data))
        rng = np.random.default_rng(seed)
        for idx in epoch_indices(len(data), batch_size, rng):
            images, labels = self._decode(data[np.sort(idx)])
            images = imageops.random_flip(imageops.random_pad_crop(images, PAD, rng), rng)
            yield self._finish(images, layout), labels

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        data = self._open(self.test_files)
        for idx in ordered_indices(len(data), batch_size, limit):
            images, labels = self._decode(data[idx])
            yield self._finish(images, layout), labels


class _Concat:
    """Row gathers across several memory maps without copying them into one array."""

    def __init__(self, parts: list[np.ndarray]):
        self.parts = parts
        self.starts = np.cumsum([0] + [len(p) for p in parts])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx)
        which = np.searchsorted(self.starts, idx, side="right") - 1
        out = np.empty((len(idx), RECORD), np.uint8)
        for k, part in enumerate(self.parts):
            sel = which == k
            if sel.any():
                out[sel] = part[idx[sel] - self.starts[k]]
        return out
