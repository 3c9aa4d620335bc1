"""DenseNet-121 in PyTorch (NCHW), following ``models.densenet.blocks``.

Module names are the canonical ones (``stem.conv``, ``block1.layer1.bn1``,
``transition1.conv``, ``final_bn``, ``fc``) because ``models.weights`` maps
state-dict keys across frameworks by name; the Keras and MindSpore builders
use the same names.  They are not torchvision's (``features.denseblock1.
denselayer1.norm1``): the zoo's names drop the ``features`` wrapper so that
MindSpore's graph-mode network can spell them with plain attributes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from torch import nn

from dlbench.models.densenet import BN_SIZE, blocks, out_channels
from dlbench.models.registry import ModelSpec

BN_EPS = 1e-5
BN_MOMENTUM = 0.1  # PyTorch convention; Keras/MindSpore spell this 0.9


def _bn(c: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class Stem(nn.Module):
    """conv 7x7/2 (no bias: BN follows) -> BN -> ReLU -> max pool 3x3/2, pad 1."""

    def __init__(self, features: int):
        super().__init__()
        self.conv = nn.Conv2d(3, features, 7, stride=2, padding=3, bias=False)
        self.bn = _bn(features)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(self.bn(self.conv(x))))


class DenseLayer(nn.Module):
    """BN -> ReLU -> conv 1x1 (bn_size * k) -> BN -> ReLU -> conv 3x3 (k); the input
    comes first in the output, then the k new channels."""

    def __init__(self, cin: int, growth_rate: int):
        super().__init__()
        width = BN_SIZE * growth_rate
        self.bn1 = _bn(cin)
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn2 = _bn(width)
        self.conv2 = nn.Conv2d(width, growth_rate, 3, padding=1, bias=False)
        self.relu = nn.ReLU(inplace=True)  # on BN outputs, never on the input x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv1(self.relu(self.bn1(x)))
        y = self.conv2(self.relu(self.bn2(y)))
        return torch.cat([x, y], 1)


class Transition(nn.Module):
    """BN -> ReLU -> conv 1x1 (halving the channels) -> average pool 2x2/2."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.bn = _bn(cin)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)
        self.pool = nn.AvgPool2d(2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(self.relu(self.bn(x))))


class DenseNet(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.stem = Stem(cfg["init_features"])
        self.order = []
        for entry in blocks(cfg):
            if entry[0] == "block":
                _, i, cin, layers = entry
                k = cfg["growth_rate"]
                module = nn.Sequential(
                    OrderedDict((f"layer{j + 1}", DenseLayer(cin + j * k, k)) for j in range(layers))
                )
                name = f"block{i}"
            else:
                _, i, cin, cout = entry
                module, name = Transition(cin, cout), f"transition{i}"
            self.add_module(name, module)
            self.order.append(name)
        c = out_channels(cfg)
        self.final_bn = _bn(c)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, cfg["num_classes"])
        self._init_weights()

    def _init_weights(self) -> None:
        # torchvision's DenseNet init (kaiming normal with its default fan_in; BN at
        # identity; the Linear's default weight and a zero bias), repeated in the Keras
        # and MindSpore builders so every framework starts from one distribution.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for name in self.order:
            x = getattr(self, name)(x)
        x = self.relu(self.final_bn(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> DenseNet:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds torch's global generator first, so that a builder called on
    its own gets reproducible weights.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return DenseNet(cfg)
