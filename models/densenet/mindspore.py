"""DenseNet-121 in MindSpore (NCHW), following ``models.densenet.blocks``.

Every Cell lives in this file and ``construct`` uses only attribute calls and
construction-time constants, which is what GRAPH_MODE can compile.  Attribute
names make MindSpore's automatic parameter names read like the PyTorch keys
(``stem.conv.weight``, ``block1.layer1.bn1.gamma``, ``transition1.conv.weight``,
``final_bn.gamma``, ``fc.bias``): ``models.weights`` maps names across
frameworks and relies on that.  A dense block is a ``SequentialCell`` built
from an ``OrderedDict``, so its layers are named ``layer1``, ``layer2``, ...
rather than list indices.
"""

from __future__ import annotations

import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

from collections import OrderedDict

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import HeNormal, HeUniform

from dlbench.models.densenet import BN_SIZE, blocks, out_channels
from dlbench.models.registry import ModelSpec

BN_EPS = 1e-5
# MindSpore's moving average keeps `momentum` of the old value: PyTorch's 0.1.
BN_MOMENTUM = 0.9


def _conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    """Symmetric k//2 padding like PyTorch ('same' pads asymmetrically when strided).

    The weights start from torchvision's DenseNet init (kaiming normal, fan_in)
    like the PyTorch and Keras builders, not MindSpore's default HeUniform(sqrt(5)).
    """
    return nn.Conv2d(
        cin,
        cout,
        k,
        stride=stride,
        pad_mode="pad",
        padding=k // 2,
        has_bias=False,
        weight_init=HeNormal(negative_slope=0, mode="fan_in", nonlinearity="relu"),
    )


def _bn(c: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)


class Stem(nn.Cell):
    """conv 7x7/2 -> BN -> ReLU -> max pool 3x3/2 pad 1.  The padded pool is one the
    ONNX converter rewrites (converters/mindspore_to_onnx.py); it can reach it here,
    outside any SequentialCell."""

    def __init__(self, features: int):
        super().__init__()
        self.conv = _conv(3, features, 7, 2)
        self.bn = _bn(features)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)

    def construct(self, x):
        return self.pool(self.relu(self.bn(self.conv(x))))


class DenseLayer(nn.Cell):
    """BN -> ReLU -> conv 1x1 -> BN -> ReLU -> conv 3x3, concatenated after the input."""

    def __init__(self, cin: int, growth_rate: int):
        super().__init__()
        width = BN_SIZE * growth_rate
        self.bn1 = _bn(cin)
        self.conv1 = _conv(cin, width, 1)
        self.bn2 = _bn(width)
        self.conv2 = _conv(width, growth_rate, 3)
        self.relu = nn.ReLU()
        self.concat = ops.Concat(axis=1)

    def construct(self, x):
        y = self.conv1(self.relu(self.bn1(x)))
        y = self.conv2(self.relu(self.bn2(y)))
        return self.concat((x, y))


class Transition(nn.Cell):
    """BN -> ReLU -> conv 1x1 -> average pool 2x2/2 (unpadded: no MaxPool3D-style
    kernel for the ONNX exporter to trip on)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.bn = _bn(cin)
        self.relu = nn.ReLU()
        self.conv = _conv(cin, cout, 1)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2, pad_mode="valid")

    def construct(self, x):
        return self.pool(self.conv(self.relu(self.bn(x))))


class DenseNet(nn.Cell):
    """Named attributes (``block1``, ``transition1``, ...) rather than one
    SequentialCell, so parameter names carry the canonical prefixes; four blocks,
    because graph mode compiles ``construct`` as written."""

    def __init__(self, cfg: dict):
        super().__init__()
        if len(cfg["blocks"]) != 4:
            raise ValueError("the MindSpore DenseNet has exactly four dense blocks")
        k = cfg["growth_rate"]
        self.stem = Stem(cfg["init_features"])
        for entry in blocks(cfg):
            if entry[0] == "block":
                _, i, cin, n = entry
                setattr(
                    self,
                    f"block{i}",
                    nn.SequentialCell(
                        OrderedDict((f"layer{j + 1}", DenseLayer(cin + j * k, k)) for j in range(n))
                    ),
                )
            else:
                _, i, cin, cout = entry
                setattr(self, f"transition{i}", Transition(cin, cout))
        c = out_channels(cfg)
        self.final_bn = _bn(c)
        self.relu = nn.ReLU()
        self.mean = ops.ReduceMean(keep_dims=False)
        # torchvision's classifier init: HeUniform(sqrt(5)) is nn.Linear's default
        # weight (uniform in +-1/sqrt(fan_in)); the bias starts at zero.
        self.fc = nn.Dense(
            c,
            cfg["num_classes"],
            has_bias=True,
            weight_init=HeUniform(negative_slope=5**0.5),
            bias_init="zeros",
        )

    def construct(self, x):
        x = self.transition1(self.block1(self.stem(x)))
        x = self.transition2(self.block2(x))
        x = self.transition3(self.block3(x))
        x = self.relu(self.final_bn(self.block4(x)))
        return self.fc(self.mean(x, (2, 3)))


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> DenseNet:
    """Logits network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` calls ``mindspore.set_seed`` first for reproducible weights.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return DenseNet(cfg)
