"""Keras 3 / TensorFlow inference on a trained ``.keras`` checkpoint.

The network is channels-last (TF's CPU convolutions need NHWC); ``predict``
takes the spec's channels-first input like every other framework and
transposes inside, so callers never care.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.errors import UserError, first_line
from models.registry import ModelSpec


def load(spec: ModelSpec, checkpoint: str | Path):
    model = spec.build("tensorflow")
    try:
        model.load_weights(str(checkpoint))
    except (ValueError, OSError, KeyError) as exc:
        first = first_line(exc)
        raise UserError(f"{checkpoint}: does not match {spec.name} in Keras ({first})") from None
    return model


def to_device(model, device: str):
    return model          # TF places ops at call time; see harness backends for device scopes


def nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x


def predict(model, x: np.ndarray) -> np.ndarray:
    return np.asarray(model(nhwc(x), training=False), dtype=np.float32)
