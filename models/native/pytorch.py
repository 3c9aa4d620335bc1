"""PyTorch inference on a trained checkpoint (a state_dict)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from dlbench.core.devices import inference_name
from dlbench.core.errors import UserError, first_line
from dlbench.models.registry import ModelSpec


def load(spec: ModelSpec, checkpoint: str | Path) -> torch.nn.Module:
    # A checkpoint holds the network training built (for BERT the pre-training
    # one); it is loaded strictly into that, then turned into the inference one.
    model = spec.build_for_training("pytorch")
    try:
        state = torch.load(str(checkpoint), map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, OSError, EOFError) as exc:
        first = first_line(exc)
        raise UserError(f"{checkpoint}: does not match {spec.name} in PyTorch ({first})") from None
    return spec.inference_from_training("pytorch", model.eval()).eval()


def to_device(model: torch.nn.Module, device: str) -> torch.nn.Module:
    return model.to(inference_name(device))


def predict(model: torch.nn.Module, x) -> np.ndarray:
    """Logits for one batch: an array, or a tuple of arrays in ``spec.inputs`` order."""
    device = next(model.parameters()).device
    xs = x if isinstance(x, (tuple, list)) else (x,)
    tensors = [torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in xs]
    with torch.inference_mode():
        return model(*tensors).float().cpu().numpy()
