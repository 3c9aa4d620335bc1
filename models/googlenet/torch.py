"""GoogLeNet (CIFAR-10 variant) in PyTorch (NCHW), following ``models.googlenet.blocks``.

Module names are torchvision's (``stem.conv``, ``inception3a.branch2.1.bn``,
``inception4e.branch4.1.conv``, ``fc``) because ``models.weights`` maps
state-dict keys across frameworks by name; the MindSpore and Keras builders
use the same names.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models.googlenet import blocks
from dlbench.models.registry import ModelSpec

BN_EPS = 1e-5
BN_MOMENTUM = 0.1  # PyTorch convention; Keras/MindSpore spell this 0.9


class BasicConv(nn.Module):
    """conv (no bias: BN follows) + BN + ReLU, with symmetric k//2 padding."""

    def __init__(self, cin: int, cout: int, k: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Inception(nn.Module):
    """Four parallel branches concatenated on channels, in this order: 1x1;
    1x1 -> 3x3; 1x1 -> 3x3 -> 3x3 (the "5x5"); 3x3/1 max pool -> 1x1."""

    def __init__(self, cin: int, n1: int, r3: int, n3: int, r5: int, n5: int, pool: int):
        super().__init__()
        self.branch1 = BasicConv(cin, n1, 1)
        self.branch2 = nn.Sequential(BasicConv(cin, r3, 1), BasicConv(r3, n3, 3))
        self.branch3 = nn.Sequential(BasicConv(cin, r5, 1), BasicConv(r5, n5, 3), BasicConv(n5, n5, 3))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), BasicConv(cin, pool, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.order = []
        for block in blocks(cfg):
            if block[0] == "stem":
                name, module = "stem", BasicConv(3, block[1], 3)
            elif block[0] == "pool":
                name, module = block[1], nn.MaxPool2d(3, stride=2, padding=1)
            else:
                name, module = block[1], Inception(block[2], *block[3])
            self.add_module(name, module)
            self.order.append(name)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(self.fc_in(cfg), cfg["num_classes"])
        self._init_weights()

    @staticmethod
    def fc_in(cfg: dict) -> int:
        n1, _, n3, _, n5, pool = cfg["inception"][-1][1:]
        return n1 + n3 + n5 + pool

    def _init_weights(self) -> None:
        # The same scheme as the ResNet builders (kaiming normal, fan_out, for
        # convs; BN at identity; nn.Linear's default), repeated in the Keras and
        # MindSpore builders so every framework starts from one distribution.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self.order:
            x = getattr(self, name)(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> GoogLeNet:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds torch's global generator first, so that a builder called on
    its own gets reproducible weights.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return GoogLeNet(cfg)
