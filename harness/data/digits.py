"""scikit-learn's bundled handwritten digits (``load_digits``): a real, labelled
image set that needs no download, for checking that training learns.

1,797 8x8 grey images (values 0-16), ten classes.  Split: a fixed stratified
80/20 train/test split (``train_test_split(..., random_state=0)``: 1,437 / 360),
independent of ``--seed`` so every run evaluates the same 360 images.  Per step:
pixels / 16, standardized with the training split's mean and std, resized
bilinearly to the model's input size and repeated over its channels.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from dlbench.harness.data import imageops
from dlbench.harness.data.base import (Batch, Dataset, check_batch, epoch_indices,
                               class_image_input, ordered_indices, to_layout)
from dlbench.models.registry import ModelSpec

CLASSES = 10
TEST_SHARE = 0.2
SPLIT_SEED = 0


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
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        x = digits.images.astype(np.float32) / 16.0
        y = digits.target.astype(np.int32)
        x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=TEST_SHARE, stratify=y,
                                                  random_state=SPLIT_SEED)
        self.mean, self.std = float(x_tr.mean()), float(x_tr.std())
        self.arrays = {"train": (x_tr, y_tr), "test": (x_te, y_te)}

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v[1]) for k, v in self.arrays.items()}

    def describe(self) -> dict:
        return {**super().describe(), "source": "sklearn.datasets.load_digits",
                "split_seed": SPLIT_SEED}

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

    def eval_batches(self, batch_size: int, layout: str,
                     limit: int | None = None) -> Iterator[Batch]:
        if not self.arrays:
            self.prepare()
        x, y = self.arrays["test"]
        for idx in ordered_indices(len(y), batch_size, limit):
            yield self._batch(x[idx], y[idx], layout)
