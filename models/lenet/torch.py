"""LeNet-5 in PyTorch (NCHW), following ``models.lenet.walk``.

Module names (``conv1`` ... ``fc3``) are the canonical names ``models.weights``
maps across frameworks; nn.Conv2d and nn.Linear keep their default init, the
one the Keras and MindSpore builders copy.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models.lenet import POOL, walk
from dlbench.models.registry import ModelSpec


class LeNet5(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.convs, self.fcs = [], []
        for op in walk(cfg):
            if op[0] == "conv":
                _, name, cin, cout, k, _ = op
                self.add_module(name, nn.Conv2d(cin, cout, k))
                self.convs.append(name)
            else:
                _, name, cin, cout = op
                self.add_module(name, nn.Linear(cin, cout))
                self.fcs.append(name)
        self.pool = nn.MaxPool2d(POOL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self.convs:
            x = self.pool(torch.relu(getattr(self, name)(x)))
        x = torch.flatten(x, 1)  # (C, H, W) order: the canonical one
        for name in self.fcs[:-1]:
            x = torch.relu(getattr(self, name)(x))
        return getattr(self, self.fcs[-1])(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> LeNet5:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries;
    ``seed`` seeds torch's global generator first (reproducible weights)."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return LeNet5(cfg)
