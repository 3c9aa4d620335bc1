"""Pre-decoded arrays in an ``.npz``: ``x`` (N, C, H, W) float and ``y`` (N,) labels,
optionally ``x_test``/``y_test`` as the held-out split.

What a user most often has at hand when the original format has no reader.
The arrays are loaded before the clock; per step the batch is gathered
(reshuffled every epoch) and converted to float32 in the framework's layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, Dataset, check_batch, epoch_indices, ordered_indices, to_layout
from dlbench.models.registry import ModelSpec


def looks_like(path: Path) -> bool:
    return path.suffix.lower() == ".npz"


def _check(spec: ModelSpec, path: Path, x: np.ndarray, y: np.ndarray, names: str) -> None:
    xn, yn = names.split(",")
    want = (len(x),) + tuple(spec.inputs[0].shape)
    if x.shape != want:
        raise UserError(
            f"--data {path}: {xn} has shape {x.shape}, {spec.name} needs (N, "
            f"{', '.join(map(str, spec.inputs[0].shape))})"
        )
    if y.shape != (len(x),) or len(y) == 0 or y.min() < 0 or y.max() >= spec.num_classes:
        raise UserError(f"--data {path}: {yn} must be {len(x)} labels in [0, {spec.num_classes})")


class Npz(Dataset):
    format = "npz"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        if not path.is_file():
            raise UserError(f"--data {path}: no such file (use 'synthetic' or an .npz file)")
        try:
            with np.load(path) as arrays:
                x, y = arrays["x"], arrays["y"]
                test = (arrays["x_test"], arrays["y_test"]) if "x_test" in arrays else None
        except KeyError as exc:
            raise UserError(
                f"--data {path}: an .npz needs arrays 'x' and 'y' (and 'y_test' with 'x_test'); missing {exc}"
            ) from None
        except (OSError, ValueError) as exc:
            raise UserError(f"--data {path}: not a readable .npz file ({exc})") from None
        _check(spec, path, x, y, "x,y")
        self.arrays = {"train": (x, y)}
        if test is not None:
            _check(spec, path, *test, "x_test,y_test")
            self.arrays["test"] = test
            self.eval_split = "test"

    def describe_source(self) -> str:
        return f"--data {self.path}"

    def no_eval_reason(self) -> str:
        return "no arrays x_test and y_test"

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v[1]) for k, v in self.arrays.items()}

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        x, y = self.arrays["train"]
        check_batch(self, batch_size, len(y))
        for idx in epoch_indices(len(y), batch_size, np.random.default_rng(seed)):
            yield self._inputs(x[idx], layout), y[idx].astype(np.int32)

    def _inputs(self, x: np.ndarray, layout: str) -> np.ndarray:
        """Images into the framework's layout; token ids keep the model's integer type."""
        if x.ndim == 4:
            return to_layout(x, layout)
        return np.ascontiguousarray(x, dtype=self.spec.inputs[0].dtype)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        x, y = self.arrays["test"]
        for idx in ordered_indices(len(y), batch_size, limit):
            yield self._inputs(x[idx], layout), y[idx].astype(np.int32)
