"""Training data for a user's model, in the shape of its own signature.

A user's model has no zoo data set: its inputs are whatever its signature
(completed by ``--shape``/``--input``) says, and its labels follow the
output training minimizes (``harness.training.user``: classes on its last
axis, or the output itself for regression).  Two sources:

* synthetic (default): learnable like ``models.synthetic``'s images.  Each of
  a few active classes has a fixed pattern per float input, and a sample is
  its class's pattern plus noise; its label is that class on every position
  of the label shape (classification) or that class's fixed target
  (regression).  Other inputs keep the fill the input plan chose (token ids
  uniform in their range, masks ones, a value the user set, the rows of an
  ``--input NAME=FILE.npy`` in turn).  Generated before the clock; data time zero.
* ``FILE.npz``: one array per input, named like the input (``x`` for a
  one-input model), ``y`` the labels in the label shape; ``*_test`` arrays
  for ``--eval``.  Read before the clock, gathered per step.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Batch, Dataset, check_batch, epoch_indices, ordered_indices
from dlbench.harness.data.synthetic import Synthetic
from dlbench.harness.training.objectives import label_dtype
from dlbench.models.registry import ModelSpec
from dlbench.models.synthetic import ACTIVE_CLASSES, NOISE


def user_config(spec: ModelSpec) -> dict[str, Any]:
    return spec.config["user"]


def open_signature(fmt: str, path: Path | None, spec: ModelSpec) -> Dataset:
    if fmt == "synthetic":
        return SignatureSynthetic(spec)
    if fmt == "npz":
        return SignatureNpz(spec, path)
    raise UserError(
        f"--data {path or fmt}: a model of your own trains on synthetic data or "
        f"an .npz of its inputs and labels (arrays named like its inputs, and y)"
    )


def _label_spec(spec: ModelSpec) -> tuple[tuple[int, ...], str]:
    return tuple(user_config(spec)["label_shape"]), label_dtype(spec.objective, "int32")


class SignatureSynthetic(Synthetic):
    def _generate(self, batch_size: int, n: int, seed: int, layout: str) -> list[Batch]:
        return signature_batches(self.spec, batch_size, n, seed)


def signature_batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0
) -> list[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    """``n_batches`` (inputs tuple in signature order, labels) pairs, one seed for all."""
    cfg = user_config(spec)
    label_shape, labels_dtype = _label_spec(spec)
    rng = np.random.default_rng(seed)
    classes = min(ACTIVE_CLASSES, spec.num_classes) if spec.num_classes else ACTIVE_CLASSES
    patterns = {
        i.name: rng.standard_normal((classes, *i.shape)).astype(np.float32)
        for i, f in zip(spec.inputs, cfg["fills"])
        if f["fill"] == "normal"
    }
    targets = (
        rng.standard_normal((classes, *label_shape)).astype(np.float32)
        if spec.objective == "regression"
        else None
    )
    files = {f["name"]: np.load(f["file"]) for f in cfg["fills"] if f["fill"] == "file"}
    out = []
    for b in range(n_batches):
        k = rng.integers(0, classes, size=batch_size)
        rows = np.arange(b * batch_size, (b + 1) * batch_size)
        inputs = tuple(
            files[i.name][rows % len(files[i.name])].astype(i.dtype)
            if i.name in files
            else _input(i, f, k, patterns, rng, batch_size)
            for i, f in zip(spec.inputs, cfg["fills"])
        )
        if targets is not None:
            labels = targets[k]
        else:
            labels = np.broadcast_to(k.reshape((-1,) + (1,) * len(label_shape)), (batch_size, *label_shape))
        out.append((inputs, np.ascontiguousarray(labels, dtype=labels_dtype)))
    return out


def _input(inp, fill: dict[str, Any], k: np.ndarray, patterns, rng, batch: int) -> np.ndarray:
    shape = (batch, *inp.shape)
    kind = fill["fill"]
    if kind == "normal":
        x = patterns[inp.name][k] + NOISE * rng.standard_normal(shape, dtype=np.float32)
    elif kind == "uniform":
        x = rng.integers(fill["range"][0], fill["range"][1], size=shape)
    elif kind == "value":
        x = np.full(shape, fill["value"])
    else:  # ones | zeros
        x = (np.ones if kind == "ones" else np.zeros)(shape)
    return np.ascontiguousarray(x, dtype=inp.dtype)


class SignatureNpz(Dataset):
    format = "npz"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        if not path.is_file():
            raise UserError(f"--data {path}: no such file")
        names = ["x"] if len(spec.inputs) == 1 else [i.name for i in spec.inputs]
        try:
            with np.load(path) as arrays:
                self.arrays = {"train": self._split(arrays, names, "")}
                if "y_test" in arrays:
                    self.arrays["test"] = self._split(arrays, names, "_test")
                    self.eval_split = "test"
        except KeyError as exc:
            raise UserError(
                f"--data {path}: an .npz for this model needs arrays "
                f"{', '.join(names)} and y (and *_test for --eval); missing "
                f"{exc}"
            ) from None
        except (OSError, ValueError) as exc:
            raise UserError(f"--data {path}: not a readable .npz file ({exc})") from None

    def _split(self, arrays, names: list[str], suffix: str) -> tuple[list[np.ndarray], np.ndarray]:
        label_shape, spec_dtype = _label_spec(self.spec)
        y = arrays["y" + suffix]
        n = len(y)
        xs = []
        for name, inp in zip(names, self.spec.inputs):
            x = arrays[name + suffix]
            if x.shape != (n, *inp.shape):
                raise UserError(
                    f"--data {self.path}: {name}{suffix} has shape {x.shape}, the "
                    f"model's input {inp.name!r} needs ({n}, "
                    f"{', '.join(map(str, inp.shape))})"
                )
            xs.append(x)
        if y.shape != (n, *label_shape) or n == 0:
            raise UserError(
                f"--data {self.path}: y{suffix} has shape {y.shape}, training "
                f"needs ({', '.join(map(str, ('N', *label_shape)))})"
            )
        if spec_dtype == "int32" and (y.min() < 0 or y.max() >= self.spec.num_classes):
            raise UserError(
                f"--data {self.path}: y{suffix} must hold classes in [0, {self.spec.num_classes})"
            )
        return xs, y.astype(spec_dtype)

    def describe_source(self) -> str:
        return f"--data {self.path}"

    def no_eval_reason(self) -> str:
        return "no array y_test"

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v[1]) for k, v in self.arrays.items()}

    def _batch(self, split: str, idx: np.ndarray) -> Batch:
        xs, y = self.arrays[split]
        return (
            tuple(np.ascontiguousarray(x[idx], dtype=i.dtype) for x, i in zip(xs, self.spec.inputs)),
            y[idx],
        )

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        n = len(self.arrays["train"][1])
        check_batch(self, batch_size, n)
        for idx in epoch_indices(n, batch_size, np.random.default_rng(seed)):
            yield self._batch("train", idx)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        for idx in ordered_indices(len(self.arrays["test"][1]), batch_size, limit):
            yield self._batch("test", idx)
