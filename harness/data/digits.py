"""Handwritten digits shipped with dlbench (``digits.npz`` beside this module): a real,
labelled image set that needs no download, for checking that training learns.

1,797 8x8 grey images (values 0-16), ten classes: the UCI "Optical Recognition of
Handwritten Digits" set (Alpaydin and Kaynak, CC BY 4.0) as scikit-learn's
``load_digits`` bundles it.  Split: fixed and stratified, 80/20 (1,437 / 360),
independent of ``--seed`` so every run evaluates the same 360 images; the file
holds both index lists in scikit-learn's order
(``train_test_split(range(1797), test_size=0.2, stratify=target,
random_state=0)``), so figures stay comparable with runs that read scikit-learn.
Reading the file instead of importing scikit-learn is deliberate: with
scikit-learn installed, every Keras import pulls it in too (0.7 s of each
TensorFlow cell's start), and a digits loader was its only use here.  Per step:
pixels / 16, standardized with the training split's mean and std, resized
bilinearly to the model's input size and repeated over its channels.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

import dlbench.harness.data.imageops as imageops
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

CLASSES = 10
SPLIT_SEED = 0  # random_state of the stored split
FILE = Path(__file__).with_name("digits.npz")


class Digits(Dataset):
    format = "digits"

    def __init__(self, spec: ModelSpec, path=None):
        super().__init__(spec, None)
        self.shape = class_image_input(spec, "--data digits")
        self.check_classes("--data digits", CLASSES)
        self.eval_split = "test"
        self.arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def describe_source(self) -> str:
        return "--data digits"

    def prepare(self) -> None:
        with np.load(FILE) as f:
            x = f["images"].astype(np.float32) / 16.0
            y = f["target"].astype(np.int32)
            split = {"train": f["train_index"], "test": f["test_index"]}
        self.arrays = {k: (x[i], y[i]) for k, i in split.items()}
        x_tr = self.arrays["train"][0]
        self.mean, self.std = float(x_tr.mean()), float(x_tr.std())

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v[1]) for k, v in self.arrays.items()}

    def describe(self) -> dict:
        return {
            **super().describe(),
            "source": "UCI optdigits, as sklearn's load_digits",
            "split_seed": SPLIT_SEED,
        }

    def _batch(self, x: np.ndarray, y: np.ndarray, layout: str) -> Batch:
        c, h, w = self.shape
        images = ((x - self.mean) / self.std)[:, None]
        images = np.repeat(imageops.resize(images, h, w), c, axis=1)
        return to_layout(images, layout), y

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if not self.arrays:
            self.prepare()
        x, y = self.arrays["train"]
        check_batch(self, batch_size, len(y))
        for idx in epoch_indices(len(y), batch_size, np.random.default_rng(seed)):
            yield self._batch(x[idx], y[idx], layout)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        if not self.arrays:
            self.prepare()
        x, y = self.arrays["test"]
        for idx in ordered_indices(len(y), batch_size, limit):
            yield self._batch(x[idx], y[idx], layout)
