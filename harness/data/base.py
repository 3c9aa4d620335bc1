"""What every data-set reader provides, and the small pieces they share.

A reader is opened in two stages: the constructor only looks (paths exist,
the layout is recognised, the model can take this data) so that the parent
process can refuse bad input before any run starts; ``prepare()`` does the
expensive once-only work (indexing files, building a vocabulary) in the run's
own process, before the clock.  Decoding, augmenting and batching happen per
step, when the training loop pulls the next batch from ``train_batches``, so
a slow reader shows in the run's data time instead of hiding in set-up.

A batch is ``(inputs, labels)``: numpy arrays, images already in the layout
the framework asked for (NCHW or NHWC), labels int32.  Token readers follow
the same pair (see ``textcorpus`` for the one dict-valued layout).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.models.registry import ModelSpec

Batch = tuple[Any, Any]


class Dataset(ABC):
    format: str = ""
    # True when every batch exists before the clock (synthetic): no per-step work.
    preloaded: bool = False
    # True when the held-out split is known only after prepare() (the run checks it then).
    eval_known_late: bool = False

    def __init__(self, spec: ModelSpec, path: Path | None):
        self.spec, self.path = spec, path
        self.eval_split: str | None = None  # name of the held-out split, if any
        self.num_classes: int | None = None  # the labels' class count, when the set says

    def check_classes(self, source: str, n_classes: int) -> None:
        """The set has ``n_classes`` labels: a model with fewer outputs cannot learn them."""
        if self.spec.num_classes < n_classes:
            raise UserError(
                f"{source}: {n_classes} classes, but {self.spec.name} has only "
                f"{self.spec.num_classes} outputs"
            )
        self.num_classes = n_classes

    def prepare(self) -> None:
        """Once-only work done in the run's process before the clock."""

    @abstractmethod
    def split_sizes(self) -> dict[str, int]:
        """Samples per split, e.g. ``{"train": 50000, "test": 10000}``."""

    @abstractmethod
    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        """Full batches forever: reshuffled every epoch, the last partial batch dropped
        (a different batch shape would recompile graph-mode frameworks mid-window)."""

    @abstractmethod
    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        """The held-out split once, in a fixed order, without augmentation."""

    def require_eval(self) -> None:
        if self.eval_split is None:
            raise UserError(
                f"--eval: {self.describe_source()} has no held-out split ({self.no_eval_reason()})"
            )

    def no_eval_reason(self) -> str:
        return "this format has none"

    def describe_source(self) -> str:
        return f"--data {self.format}:{self.path}" if self.path else f"--data {self.format}"

    def describe(self) -> dict[str, Any]:
        """What ``context.data`` records."""
        return {
            "reader": self.format,
            "path": str(self.path) if self.path else None,
            "splits": self.split_sizes(),
            "eval_split": self.eval_split,
            "per_step": not self.preloaded,
        }


def check_batch(ds: Dataset, batch_size: int, n_train: int) -> None:
    if n_train < batch_size:
        raise UserError(
            f"{ds.describe_source()}: {n_train} training samples, fewer than one batch of {batch_size}"
        )


def epoch_indices(n: int, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Index arrays of full batches, a fresh permutation every epoch, forever."""
    per_epoch = n // batch_size
    while True:
        order = rng.permutation(n)
        for b in range(per_epoch):
            yield order[b * batch_size : (b + 1) * batch_size]


def ordered_indices(n: int, batch_size: int, limit: int | None) -> Iterator[np.ndarray]:
    """The first ``limit`` (default all) indices in order, the last batch possibly short."""
    n = n if limit is None else min(n, limit)
    for start in range(0, n, batch_size):
        yield np.arange(start, min(n, start + batch_size))


def to_layout(images: np.ndarray, layout: str) -> np.ndarray:
    """NCHW float32 images into ``layout``, contiguous (frameworks copy faster from it)."""
    if layout == "NHWC":
        images = images.transpose(0, 2, 3, 1)
    elif layout != "NCHW":
        raise ValueError(f"layout must be NCHW or NHWC, not {layout}")
    return np.ascontiguousarray(images, dtype=np.float32)


# Objectives whose labels are boxes (read by harness.data.voc / coco, or synthetic).
BOX_OBJECTIVES = ("detection", "instance-segmentation")


def image_input(spec: ModelSpec, source: str) -> tuple[int, int, int]:
    """(C, H, W) of a model that takes one float image, or a UserError naming ``source``."""
    inp = spec.inputs[0]
    if len(spec.inputs) != 1 or len(inp.shape) != 3 or not inp.dtype.startswith("float"):
        shapes = ", ".join(f"{i.name} {i.dtype}{list(i.shape)}" for i in spec.inputs)
        raise UserError(f"{source}: image data, but {spec.name} takes {shapes}")
    return inp.shape  # type: ignore[return-value]


def class_image_input(spec: ModelSpec, source: str) -> tuple[int, int, int]:
    """``image_input`` for readers whose labels are one class per image.  A detector's
    labels are boxes: class labels would reach its loss as nonsense (SSD's tally died
    unpacking a class index as box targets)."""
    if spec.objective in BOX_OBJECTIVES:
        raise UserError(
            f"{source}: images labelled with a class, but {spec.name} is scored "
            f"on boxes ({spec.objective}): use --data synthetic, voc:DIR or "
            f"coco:DIR"
        )
    return image_input(spec, source)


def token_input(spec: ModelSpec, source: str) -> tuple[int, int]:
    """(sequence length, vocabulary size) of a model whose first input is token ids."""
    inp = spec.inputs[0]
    if len(inp.shape) != 1 or not inp.dtype.startswith("int") or not inp.int_range:
        raise UserError(
            f"{source}: token data, but {spec.name} takes {inp.name} {inp.dtype}{list(inp.shape)}"
        )
    return inp.shape[0], inp.int_range[1]
