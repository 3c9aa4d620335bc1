"""VGG16 in PyTorch (NCHW), following ``models.vgg.convs`` and ``models.vgg.dense``.

Module names (``conv1_1`` ... ``fc8``) are the canonical names ``models.weights``
maps across frameworks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models.registry import ModelSpec
from dlbench.models.vgg import POOL, convs, dense


class VGG(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        # (name, closes a stage) in order: a max pool follows each stage's last conv.
        self.convs = []
        for name, cin, cout, _, closes in convs(cfg):
            self.add_module(name, nn.Conv2d(cin, cout, 3, padding=1))
            self.convs.append((name, closes))
        self.fcs = []
        for name, cin, cout in dense(cfg):
            self.add_module(name, nn.Linear(cin, cout))
            self.fcs.append(name)
        self.pool = nn.MaxPool2d(POOL)
        self.dropout = nn.Dropout(cfg["dropout"])
        self._init_weights()

    def _init_weights(self) -> None:
        """``models.vgg``'s init, which the Keras and MindSpore builders repeat."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, m.in_features**-0.5)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name, closes in self.convs:
            x = torch.relu(getattr(self, name)(x))
            if closes:
                x = self.pool(x)
        x = torch.flatten(x, 1)  # (C, H, W) order: the canonical one
        for name in self.fcs[:-1]:
            x = self.dropout(torch.relu(getattr(self, name)(x)))
        return getattr(self, self.fcs[-1])(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> VGG:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries;
    ``seed`` seeds torch's global generator first (reproducible weights)."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return VGG(cfg)
