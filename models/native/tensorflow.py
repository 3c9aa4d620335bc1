"""Keras 3 / TensorFlow inference on a trained ``.keras`` checkpoint.

The network is channels-last (TF's CPU convolutions need NHWC); ``predict``
takes the spec's channels-first input like every other framework and
transposes inside, so callers never care.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError, first_line
from dlbench.models.registry import ModelSpec


def load(spec: ModelSpec, checkpoint: str | Path):
    # A checkpoint holds the network training built (for BERT the pre-training
    # one); it is loaded strictly into that, then turned into the inference one.
    model = spec.build_for_training("tensorflow")
    try:
        model.load_weights(str(checkpoint))
    except (ValueError, OSError, KeyError) as exc:
        first = first_line(exc)
        raise UserError(f"{checkpoint}: does not match {spec.name} in Keras ({first})") from None
    return spec.inference_from_training("tensorflow", model)


def to_device(model, device: str):
    return model  # TF places ops at call time; see harness backends for device scopes


def nhwc(x: np.ndarray) -> np.ndarray:
    """NCHW images to NHWC; anything else (token ids, masks) as it is."""
    if x.ndim == 4 and x.dtype.kind == "f":
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    return x


def predict(model, x) -> np.ndarray:
    """Logits for one batch: an array, or a tuple of arrays in ``spec.inputs`` order
    (a functional model with several inputs takes them as a list)."""
    xs = [nhwc(a) for a in (x if isinstance(x, (tuple, list)) else (x,))]
    return np.asarray(model(xs[0] if len(xs) == 1 else xs, training=False), dtype=np.float32)
