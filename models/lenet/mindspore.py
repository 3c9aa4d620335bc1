"""LeNet-5 in MindSpore (NCHW), following ``models.lenet.walk``.

``construct`` uses only attribute calls and construction-time constants
(GRAPH_MODE compiles it).  Attribute names make the parameter names the
canonical ones (``conv1.weight``, ``fc3.bias``).  Convs and dense layers start
from PyTorch's default init (uniform in +-1/sqrt(fan_in), weights and
biases), not MindSpore's defaults, so the frameworks start alike.
"""

from __future__ import annotations

import math
import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Uniform

from dlbench.models.lenet import POOL, walk
from dlbench.models.registry import ModelSpec


def _init(fan_in: int) -> dict:
    bound = 1 / math.sqrt(fan_in)
    return {"weight_init": Uniform(bound), "bias_init": Uniform(bound)}


class LeNet5(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        names = []
        for op in walk(cfg):
            if op[0] == "conv":
                _, name, cin, cout, k, _ = op
                cell = nn.Conv2d(cin, cout, k, pad_mode="valid", has_bias=True, **_init(cin * k * k))
            else:
                _, name, cin, cout = op
                cell = nn.Dense(cin, cout, has_bias=True, **_init(cin))
            setattr(self, name, cell)
            names.append(name)
        if names != list(_ORDER):
            raise ValueError(f"the MindSpore LeNet-5 expects layers {_ORDER}, got {names}")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=POOL, stride=POOL)
        self.flatten = ops.Flatten()

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.flatten(x)  # (C, H, W) order: the canonical one
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


# The layer sequence ``construct`` spells out (graph mode compiles it statically).
_ORDER = ("conv1", "conv2", "fc1", "fc2", "fc3")


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> LeNet5:
    """Logits network for ``spec``; ``seed`` calls ``mindspore.set_seed`` first."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return LeNet5(cfg)
