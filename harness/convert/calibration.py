"""Where INT8 calibration data comes from: a user's file, a bundled data set, or synthesis.

The hops take calibration batches as an argument; choosing and reading them
is the harness's job, because only it knows the data sets and the verifier's
seeds (calibration must never see the inputs an INT8 model is judged on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.converters.base import BuildOptions
from dlbench.core.errors import UserError
from dlbench.harness.verify import inputs as vin


def read_calibration_file(path: str | Path, chw: tuple[int, ...]) -> np.ndarray:
    """``x`` of an .npz, or a bundled data set's training split by name (``digits``)."""
    from dlbench.harness.evaluate.data import calibration_images, is_calibration_set

    if is_calibration_set(str(path)):
        return calibration_images(str(path), chw)
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--calib-data {path}: no such file")
    try:
        with np.load(path) as data:
            if "x" not in data.files:
                raise UserError(
                    f"--calib-data {path}: no array 'x' in it (has {', '.join(data.files) or 'nothing'})"
                )
            x = np.asarray(data["x"], dtype=np.float32)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile/pickle errors of a bad file
        raise UserError(f"--calib-data {path}: not a readable .npz file ({exc})") from None
    if x.ndim != 4 or tuple(x.shape[1:]) != tuple(chw):
        raise UserError(
            f"--calib-data {path}: x is {list(x.shape)}, the model takes N×{'×'.join(map(str, chw))}"
        )
    if len(x) == 0:
        raise UserError(f"--calib-data {path}: x holds no samples")
    return x


def batches(source: str | Path, summary, options: BuildOptions, given: Any = None) -> list[Any]:
    """The calibration set in batches of ``calib_batch``: from the file, or synthetic
    (by the user's input options, ``given``, where set).  ``summary`` is the source's
    (``onnx_summary.summarize``), which the caller has read."""
    batch = max(1, int(options.calib_batch))
    if options.calib_data:
        x = read_calibration_file(options.calib_data, vin.image_shape_of(summary, str(source))[0])
        return [x[i : i + batch] for i in range(0, len(x), batch)]
    if options.calib_size < 1:
        raise UserError(f"--calib-size must be at least 1, got {options.calib_size}")
    n = -(-int(options.calib_size) // batch)
    # Token models (dlbench's own, by metadata) calibrate on synthetic token ids.
    return vin.calibration_stream(summary, batch, n, seed=vin.CALIB_SEED, path=str(source), given=given)


class Deferred(Sequence):
    """Calibration batches made on first use.  An INT8 build left to choose its mode
    (neither --static nor --dynamic) learns only inside the quantizer, from the prepared
    graph, whether it calibrates: a transformer goes dynamic and reads none, so making
    (or reading) the set up front was work thrown away."""

    def __init__(self, make: Callable[[], list[Any]]):
        self._make, self._batches = make, None

    def _all(self) -> list[Any]:
        if self._batches is None:
            self._batches = self._make()
        return self._batches

    def __bool__(self) -> bool:  # a set is asked for: it holds at least one batch
        return True

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._all())


def describe(options: BuildOptions) -> str:
    """What the records say the calibration set was."""
    if options.calib_data:
        return str(options.calib_data)
    return f"synthetic (models.synthetic, seed {vin.CALIB_SEED})"
