"""PyTorch inference on a trained checkpoint (a state_dict)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from harness.errors import UserError, first_line
from models.registry import ModelSpec


def load(spec: ModelSpec, checkpoint: str | Path) -> torch.nn.Module:
    model = spec.build("pytorch")
    try:
        state = torch.load(str(checkpoint), map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, OSError, EOFError) as exc:
        first = first_line(exc)
        raise UserError(f"{checkpoint}: does not match {spec.name} in PyTorch ({first})") from None
    return model.eval()


def to_device(model: torch.nn.Module, device: str) -> torch.nn.Module:
    return model.to("cuda" if device in ("gpu", "cuda") else device)


def predict(model: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    device = next(model.parameters()).device
    with torch.inference_mode():
        return model(torch.from_numpy(np.ascontiguousarray(x)).to(device)).float().cpu().numpy()
