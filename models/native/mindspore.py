"""MindSpore inference on a trained ``.ckpt`` checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

os.environ.setdefault("GLOG_v", "3")
import mindspore as ms

from dlbench.core.errors import UserError, first_line
from dlbench.models.registry import ModelSpec


def load(spec: ModelSpec, checkpoint: str | Path):
    # A checkpoint holds the network training built (for BERT the pre-training
    # one); it is loaded strictly into that, then turned into the inference one.
    model = spec.build_for_training("mindspore")
    try:
        params = ms.load_checkpoint(str(checkpoint))
        missing, _unexpected = ms.load_param_into_net(model, params, strict_load=True)
    except (ValueError, RuntimeError, OSError, TypeError) as exc:
        first = first_line(exc)
        raise UserError(f"{checkpoint}: does not match {spec.name} in MindSpore ({first})") from None
    if missing:
        raise UserError(
            f"{checkpoint}: does not match {spec.name} in MindSpore "
            f"(missing {len(missing)} parameters, e.g. {missing[0]})"
        )
    model.set_train(False)
    model = spec.inference_from_training("mindspore", model)
    model.set_train(False)
    return model


def to_device(model, device: str):
    return model  # MindSpore's device is process-wide (ms.set_device)


def predict(model, x) -> np.ndarray:
    """Logits for one batch: an array, or a tuple of arrays in ``spec.inputs`` order;
    images as float32, integer inputs (token ids) in their own dtype."""
    xs = x if isinstance(x, (tuple, list)) else (x,)
    tensors = [
        ms.Tensor(np.ascontiguousarray(a, dtype=None if a.dtype.kind in "iub" else np.float32)) for a in xs
    ]
    return model(*tensors).asnumpy()
