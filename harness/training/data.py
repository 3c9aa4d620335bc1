"""Training inputs, generated or read completely before the clock starts."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.errors import UserError
from models import synthetic
from models.registry import ModelSpec


def load_batches(spec: ModelSpec, data: str, batch_size: int, wanted: int, seed: int,
                 layout: str) -> list[tuple[np.ndarray, np.ndarray]]:
    if data == "synthetic":
        n = synthetic.pool_size(spec, batch_size, wanted)
        return synthetic.image_batches(spec, batch_size, n, seed=seed, layout=layout)
    return npz_batches(spec, Path(data), batch_size, wanted, layout)


def read_npz(spec: ModelSpec, path: Path, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (N, C, H, W) and ``y`` (N,) from an ``.npz``, checked against ``spec``.

    Folder formats (ImageNet JPEG folders, CIFAR binaries, aclImdb) get their own
    readers; a pre-decoded array file is what a user most often has at hand.
    The parent calls this too, so a wrong file is refused before any run starts.
    """
    if not path.is_file():
        raise UserError(f"--data {path}: no such file (use 'synthetic' or an .npz file)")
    try:
        with np.load(path) as arrays:
            x, y = arrays["x"], arrays["y"]
    except KeyError:
        raise UserError(f"--data {path}: an .npz needs arrays 'x' and 'y'") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"--data {path}: not a readable .npz file ({exc})") from None
    want = (len(x),) + tuple(spec.inputs[0].shape)
    if x.shape != want:
        raise UserError(f"--data {path}: x has shape {x.shape}, {spec.name} needs (N, "
                        f"{', '.join(map(str, spec.inputs[0].shape))})")
    if y.shape != (len(x),) or y.min() < 0 or y.max() >= spec.num_classes:
        raise UserError(f"--data {path}: y must be {len(x)} labels in [0, {spec.num_classes})")
    if len(x) < batch_size:
        raise UserError(f"--data {path}: {len(x)} samples, fewer than one batch of {batch_size}")
    return x, y


def npz_batches(spec: ModelSpec, path: Path, batch_size: int, wanted: int,
                layout: str) -> list[tuple[np.ndarray, np.ndarray]]:
    x, y = read_npz(spec, path, batch_size)
    x = x.astype(np.float32)
    if layout == "NHWC":
        x = x.transpose(0, 2, 3, 1)
    n = min(wanted, len(x) // batch_size)
    return [(np.ascontiguousarray(x[i * batch_size:(i + 1) * batch_size]),
             y[i * batch_size:(i + 1) * batch_size].astype(np.int32)) for i in range(n)]
