"""ResNet-50 v1.5 in MindSpore (NCHW), following ``models.resnet.walk``.

Every Cell of the network lives in this file because GRAPH_MODE compiles the
Python source of ``construct``; keeping it to plain attribute calls, ``if``
on construction-time constants and arithmetic is what lets it compile.

Attribute names are chosen so MindSpore's automatic parameter names read like
the PyTorch ones (``stem.conv.weight``, ``layer1.0.bn1.gamma``,
``layer1.0.downsample.conv.weight``, ``fc.bias``): the weight-transfer tool
maps names across frameworks and relies on that.
"""

from __future__ import annotations

import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import HeNormal

from dlbench.models.registry import ModelSpec
from dlbench.models.resnet import EXPANSION

BN_EPS = 1e-5
# MindSpore's moving average keeps `momentum` of the old value: 0.9 here is
# PyTorch's momentum=0.1.
BN_MOMENTUM = 0.9


def _conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    """Symmetric k//2 padding like PyTorch; 'same' would pad asymmetrically when strided.

    The weights start from torchvision's ResNet init (kaiming normal, fan_out,
    relu) as the PyTorch and Keras builders do, not from MindSpore's default
    HeUniform(sqrt(5)), so the frameworks train from the same distribution.
    """
    return nn.Conv2d(
        cin,
        cout,
        k,
        stride=stride,
        pad_mode="pad",
        padding=k // 2,
        has_bias=False,
        weight_init=HeNormal(negative_slope=0, mode="fan_out", nonlinearity="relu"),
    )


def _bn(c: int, zero_gamma: bool = False) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM, gamma_init="zeros" if zero_gamma else "ones")


class ConvBN(nn.Cell):
    """A conv and its batch norm, named ``conv``/``bn`` (the stem and the shortcuts)."""

    def __init__(self, cin: int, cout: int, k: int, stride: int):
        super().__init__()
        self.conv = _conv(cin, cout, k, stride)
        self.bn = _bn(cout)

    def construct(self, x):
        return self.bn(self.conv(x))


class Bottleneck(nn.Cell):
    """v1.5: the stride sits on the 3x3 conv, not on the first 1x1."""

    def __init__(self, cin: int, planes: int, stride: int, downsample: bool, zero_init_residual: bool):
        super().__init__()
        out = planes * EXPANSION
        self.conv1 = _conv(cin, planes, 1)
        self.bn1 = _bn(planes)
        self.conv2 = _conv(planes, planes, 3, stride)
        self.bn2 = _bn(planes)
        self.conv3 = _conv(planes, out, 1)
        # Zero gamma makes the block start as the identity (Goyal et al. 2017), as
        # in the PyTorch builder: without it the 16 residual sums inflate the first
        # logits and a short run at lr 0.05 diverges for some seeds.
        self.bn3 = _bn(out, zero_gamma=zero_init_residual)
        self.relu = nn.ReLU()
        self.has_downsample = downsample
        # Graph mode needs the attribute to exist on every block; None is allowed.
        self.downsample = ConvBN(cin, out, 1, stride) if downsample else None

    def construct(self, x):
        identity = x
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        if self.has_downsample:
            identity = self.downsample(x)
        return self.relu(y + identity)


class Stem(nn.Cell):
    def __init__(self, width: int):
        super().__init__()
        self.conv = _conv(3, width, 7, 2)
        self.bn = _bn(width)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)

    def construct(self, x):
        return self.pool(self.relu(self.bn(self.conv(x))))


class ResNet(nn.Cell):
    def __init__(self, layers, width: int, num_classes: int, zero_init_residual: bool = True):
        super().__init__()
        self.stem = Stem(width)
        cin = width
        stages = []
        for stage, blocks in enumerate(layers):
            planes = width * 2**stage
            cells = []
            for b in range(blocks):
                stride = 2 if (stage > 0 and b == 0) else 1
                cells.append(
                    Bottleneck(
                        cin, planes, stride, downsample=(b == 0), zero_init_residual=zero_init_residual
                    )
                )
                cin = planes * EXPANSION
            stages.append(nn.SequentialCell(cells))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Dense(cin, num_classes, has_bias=True)
        self.mean = ops.ReduceMean(keep_dims=False)

    def construct(self, x):
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.mean(x, (2, 3)))


def build(spec: ModelSpec, seed: int | None = None, zero_init_residual: bool = True, **overrides) -> ResNet:
    """Logits network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` calls ``mindspore.set_seed`` first, so that a builder called on its
    own (the reference loop, the tests) gets reproducible weights.
    """
    cfg = spec.config_with(overrides)
    if len(cfg["layers"]) != 4:
        raise ValueError("the MindSpore ResNet has exactly four stages")
    if seed is not None:
        ms.set_seed(seed)
    return ResNet(cfg["layers"], cfg["width"], cfg["num_classes"], zero_init_residual)
