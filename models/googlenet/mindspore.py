"""GoogLeNet (CIFAR-10 variant) in MindSpore (NCHW), following ``models.googlenet.blocks``.

Every Cell lives in this file and ``construct`` uses only attribute calls and
construction-time constants, which is what GRAPH_MODE can compile.  Attribute
names make MindSpore's automatic parameter names read like the PyTorch keys
(``stem.conv.weight``, ``inception3a.branch2.1.bn.gamma``, ``fc.bias``):
``models.weights`` maps names across frameworks and relies on that.
"""

from __future__ import annotations

import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import HeNormal

from dlbench.models.googlenet import blocks
from dlbench.models.registry import ModelSpec

BN_EPS = 1e-5
# MindSpore's moving average keeps `momentum` of the old value: PyTorch's 0.1.
BN_MOMENTUM = 0.9


def _pool(stride: int) -> nn.MaxPool2d:
    """A 3x3 max pool padded by 1 on every side, as in PyTorch.

    Strided, ``'same'`` would pad bottom/right only, so the stride-2 pools use
    explicit padding (``pad_mode="pad"``; the ONNX exporter rewrites those,
    see converters/mindspore_to_onnx.py).  At stride 1 ``'same'`` is that same
    symmetric padding and runs the plain MaxPool kernel, which MindSpore's ONNX
    exporter converts directly: the exporter's rewrite cannot reach a pool
    inside a ``SequentialCell`` (it calls its cached ``cell_list``), which is
    where the branch-4 pool lives.
    """
    if stride == 1:
        return nn.MaxPool2d(kernel_size=3, stride=1, pad_mode="same")
    return nn.MaxPool2d(kernel_size=3, stride=stride, pad_mode="pad", padding=1)


class BasicConv(nn.Cell):
    """conv (no bias: BN follows) + BN + ReLU with symmetric k//2 padding.

    Convs start from torchvision's init (kaiming normal, fan_out, relu) like the
    PyTorch and Keras builders, not MindSpore's default HeUniform(sqrt(5)).
    """

    def __init__(self, cin: int, cout: int, k: int):
        super().__init__()
        self.conv = nn.Conv2d(
            cin,
            cout,
            k,
            stride=1,
            pad_mode="pad",
            padding=k // 2,
            has_bias=False,
            weight_init=HeNormal(negative_slope=0, mode="fan_out", nonlinearity="relu"),
        )
        self.bn = nn.BatchNorm2d(cout, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))


class Inception(nn.Cell):
    """Branches 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3; 3x3/1 max pool -> 1x1, concatenated."""

    def __init__(self, cin: int, n1: int, r3: int, n3: int, r5: int, n5: int, pool: int):
        super().__init__()
        self.branch1 = BasicConv(cin, n1, 1)
        self.branch2 = nn.SequentialCell([BasicConv(cin, r3, 1), BasicConv(r3, n3, 3)])
        self.branch3 = nn.SequentialCell([BasicConv(cin, r5, 1), BasicConv(r5, n5, 3), BasicConv(n5, n5, 3)])
        self.branch4 = nn.SequentialCell([_pool(1), BasicConv(cin, pool, 1)])
        self.concat = ops.Concat(axis=1)

    def construct(self, x):
        return self.concat((self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)))


class GoogLeNet(nn.Cell):
    """Named attributes rather than one SequentialCell, so parameter names carry
    the block names (``inception4a....``) and not list indices."""

    def __init__(self, cfg: dict):
        super().__init__()
        made = {}
        for block in blocks(cfg):
            if block[0] == "stem":
                made["stem"] = BasicConv(3, block[1], 3)
            elif block[0] == "pool":
                made[block[1]] = _pool(2)
            else:
                made[block[1]] = Inception(block[2], *block[3])
        if list(made) != list(_ORDER):
            raise ValueError(f"the MindSpore GoogLeNet expects blocks {_ORDER}, got {list(made)}")
        for name, cell in made.items():
            setattr(self, name, cell)
        n1, _, n3, _, n5, pool = cfg["inception"][-1][1:]
        self.fc = nn.Dense(n1 + n3 + n5 + pool, cfg["num_classes"], has_bias=True)
        self.mean = ops.ReduceMean(keep_dims=False)

    def construct(self, x):
        x = self.inception3b(self.inception3a(self.stem(x)))
        x = self.maxpool3(x)
        x = self.inception4c(self.inception4b(self.inception4a(x)))
        x = self.inception4e(self.inception4d(x))
        x = self.maxpool4(x)
        x = self.inception5b(self.inception5a(x))
        return self.fc(self.mean(x, (2, 3)))


# The block sequence ``construct`` spells out (graph mode compiles it statically).
_ORDER = (
    "stem",
    "inception3a",
    "inception3b",
    "maxpool3",
    "inception4a",
    "inception4b",
    "inception4c",
    "inception4d",
    "inception4e",
    "maxpool4",
    "inception5a",
    "inception5b",
)


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> GoogLeNet:
    """Logits network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` calls ``mindspore.set_seed`` first for reproducible weights.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return GoogLeNet(cfg)
