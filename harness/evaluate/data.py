"""The held-out samples ``dlbench eval`` scores, and real calibration images for INT8.

Both come from the ``harness.data`` readers, never from a copy of them: the
held-out split is the one ``dlbench train --eval`` reports on, preprocessed
the same way (for digits: the fixed stratified split, standardized with the
training split's statistics, resized to the model's input), so an accuracy
measured here on an exported file is comparable with the framework's own.

A reader wants a zoo ``ModelSpec`` (input shape, class count); an ONNX file
dlbench did not export has none, so one is described from the graph's shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data import open_dataset
from dlbench.harness.data.base import Batch, Dataset
from dlbench.models.registry import InputSpec, ModelSpec, get_model, list_models

# Names ``--calib-data`` takes instead of a file: the data set's training split.
CALIBRATION_SETS = ("digits",)


def spec_for(model: str | None, chw: Sequence[int] | None = None, classes: int | None = None) -> ModelSpec:
    """The zoo spec of ``model``, or one that describes an image model by its shape."""
    if model and model in list_models():
        return get_model(model)
    if chw is None:
        raise UserError(f"{model or 'this model'}: not a zoo model, and its input shape is unknown")
    return ModelSpec(
        name=model or "model",
        display_name=model or "model",
        family="external",
        task="image-classification",
        network_type="unknown",
        dataset="unknown",
        inputs=(InputSpec("input", tuple(int(d) for d in chw)),),
        num_classes=int(classes or 0),
        default_batch_size=1,
        builders={},
    )


def open_heldout(data: str, spec: ModelSpec) -> Dataset:
    """The reader for ``data``, refused (UserError) if it has no held-out split."""
    ds = open_dataset(data, spec)
    if not ds.eval_known_late:
        ds.require_eval()
    return ds


def heldout_batches(ds: Dataset, batch_size: int, limit: int | None = None) -> Iterator[Batch]:
    """The held-out split once, in its fixed order, channels-first (NCHW) like every
    backend runner takes its inputs."""
    ds.prepare()
    if ds.eval_known_late:
        ds.require_eval()
    return ds.eval_batches(batch_size, "NCHW", limit)


def is_calibration_set(value: str | None) -> bool:
    return value in CALIBRATION_SETS


def calibration_images(name: str, chw: Sequence[int]) -> np.ndarray:
    """Every image of data set ``name``'s training split at ``chw``, float32 NCHW,
    preprocessed exactly as training sees them (one shuffled epoch, seed 0)."""
    if name not in CALIBRATION_SETS:
        raise UserError(f"--calib-data {name}: not a data set name ({', '.join(CALIBRATION_SETS)})")
    if len(chw) != 3:
        raise UserError(f"--calib-data {name}: an image data set, but the model takes {list(chw)}")
    ds = open_dataset(name, spec_for(None, chw, 10))
    ds.prepare()
    n = ds.split_sizes()["train"]
    images, _ = next(ds.train_batches(n, 0, "NCHW"))  # one batch = the whole split
    return np.asarray(images, dtype=np.float32)


def heldout_images(name: str, chw: Sequence[int], batch_sizes: Sequence[int]) -> list[np.ndarray]:
    """Consecutive held-out images of data set ``name`` at ``chw``, one NCHW array per
    batch size: what a build calibrated on that set's training split is verified on."""
    ds = open_heldout(name, spec_for(None, chw, 10))
    n = sum(batch_sizes)
    images = np.concatenate([x for x, _ in heldout_batches(ds, n, n)])
    if len(images) < n:
        raise UserError(f"--calib-data {name}: {len(images)} held-out images, the verifier needs {n}")
    starts = np.cumsum([0, *batch_sizes])
    return [np.ascontiguousarray(images[a:b]) for a, b in zip(starts[:-1], starts[1:])]
