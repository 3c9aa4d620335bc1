"""ResNet-50 v1.5 in PyTorch (NCHW), built from ``spec.config``.

Layer names follow ``models.resnet.walk`` order (``stem.conv``,
``layer1.0.conv1``, ``layer1.0.downsample.conv``, ``fc``) because the
weight-transfer tool maps state-dict keys across frameworks by name.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models.registry import ModelSpec
from dlbench.models.resnet import EXPANSION

BN_EPS = 1e-5
BN_MOMENTUM = 0.1  # PyTorch convention; Keras/MindSpore spell this 0.9


def _conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    # Symmetric k//2 padding on every side, no bias (a BN always follows).
    return nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)


def _bn(c: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class ConvBN(nn.Sequential):
    """A conv and its BN, named ``conv``/``bn`` so that keys read ``stem.conv.weight``."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1):
        super().__init__()
        self.conv = _conv(cin, cout, k, stride)
        self.bn = _bn(cout)


class Bottleneck(nn.Module):
    """v1.5: the stride sits on the 3x3 conv, not on the first 1x1."""

    def __init__(self, cin: int, planes: int, stride: int, downsample: bool):
        super().__init__()
        out = planes * EXPANSION
        self.conv1, self.bn1 = _conv(cin, planes, 1), _bn(planes)
        self.conv2, self.bn2 = _conv(planes, planes, 3, stride), _bn(planes)
        self.conv3, self.bn3 = _conv(planes, out, 1), _bn(out)
        self.downsample = ConvBN(cin, out, 1, stride) if downsample else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    def __init__(self, layers, width: int, num_classes: int, zero_init_residual: bool = True):
        super().__init__()
        self.stem = ConvBN(3, width, 7, 2)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = width
        self.stages = []
        for stage, blocks in enumerate(layers):
            planes = width * 2**stage
            seq = nn.Sequential()
            for b in range(blocks):
                stride = 2 if (stage > 0 and b == 0) else 1
                seq.append(Bottleneck(cin, planes, stride, downsample=(b == 0)))
                cin = planes * EXPANSION
            self.add_module(f"layer{stage + 1}", seq)
            self.stages.append(f"layer{stage + 1}")
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        self._init_weights(zero_init_residual)

    def _init_weights(self, zero_init_residual: bool) -> None:
        """torchvision's scheme, plus zero gamma on each block's last BN by default.

        Zeroing ``bn3.weight`` makes every block start as the identity (Goyal et
        al. 2017, NVIDIA's v1.5 recipe): without it the 16 residual sums inflate
        the initial logits and a short from-scratch run at lr 0.05 diverges for
        some seeds.  It changes the initial weights only, not the function.
        """
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.zeros_(m.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.stem(x)))
        for name in self.stages:
            x = getattr(self, name)(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(
    spec: ModelSpec, seed: int | None = None, zero_init_residual: bool = True, **overrides: Any
) -> ResNet:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds torch's global generator first, so that a builder called on
    its own (as the reference loop and the tests do) gets reproducible weights.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return ResNet(cfg["layers"], cfg["width"], cfg["num_classes"], zero_init_residual)
