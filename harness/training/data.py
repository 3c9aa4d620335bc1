"""Training inputs: the reader for ``--data`` and the batches a session starts with.

Synthetic data is generated completely before the clock (its data time is
zero); every real reader (``harness.data``) decodes per step, between steps,
outside the timed step, and the loop reports that time apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.harness.data import open_dataset
from dlbench.harness.data.base import Batch, Dataset
from dlbench.harness.data.npz import Npz
from dlbench.models.registry import ModelSpec


def start(
    spec: ModelSpec, data: str, batch_size: int, wanted: int, seed: int, layout: str
) -> tuple[Dataset, list[Batch], Iterator[Batch] | None]:
    """(reader, the batches to build the session with, per-step stream or None).

    The session is built with one batch from a real reader (its shapes and
    dtypes); every step then pulls its own.  Synthetic data: the whole pool.
    """
    ds = open_dataset(data, spec)
    ds.prepare()
    if ds.preloaded:
        return ds, ds.pool(batch_size, wanted, seed, layout), None
    stream = ds.train_batches(batch_size, seed, layout)
    return ds, [next(stream)], stream


def load_batches(
    spec: ModelSpec, data: str, batch_size: int, wanted: int, seed: int, layout: str
) -> list[Batch]:
    """Up to ``wanted`` batches, all at once (kept for callers that need a fixed list)."""
    ds, first, stream = start(spec, data, batch_size, wanted, seed, layout)
    if stream is None:
        return first
    return first + [next(stream) for _ in range(wanted - 1)]


def read_npz(spec: ModelSpec, path: Path, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` of an ``.npz``, checked against ``spec`` (see ``harness.data.npz``)."""
    from dlbench.harness.data.base import check_batch

    ds = Npz(spec, Path(path))
    x, y = ds.arrays["train"]
    check_batch(ds, batch_size, len(y))
    return x, y
