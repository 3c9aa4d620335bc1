"""VGG16 in MindSpore (NCHW), following ``models.vgg``.

``construct`` spells out configuration D's thirteen convolutions and three
dense layers by attribute name: GRAPH_MODE compiles the source, and keeping
each layer a plain attribute (not an entry of a ``SequentialCell``) makes the
parameter names the canonical ones (``conv1_1.weight``, ``fc8.bias``).  The
widths, input size and classes still come from the spec, so the mini variant
is the same code.  Initializers are ``models.vgg``'s, as in the other builders.
"""

from __future__ import annotations

import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import HeNormal, Normal

from dlbench.models.registry import ModelSpec
from dlbench.models.vgg import POOL, convs, dense

# The layer sequence ``construct`` spells out (graph mode compiles it statically).
_ORDER = (
    "conv1_1",
    "conv1_2",
    "conv2_1",
    "conv2_2",
    "conv3_1",
    "conv3_2",
    "conv3_3",
    "conv4_1",
    "conv4_2",
    "conv4_3",
    "conv5_1",
    "conv5_2",
    "conv5_3",
    "fc6",
    "fc7",
    "fc8",
)


class VGG16(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        names = []
        for name, cin, cout, _, _ in convs(cfg):
            setattr(
                self,
                name,
                nn.Conv2d(
                    cin,
                    cout,
                    3,
                    pad_mode="pad",
                    padding=1,
                    has_bias=True,
                    bias_init="zeros",
                    weight_init=HeNormal(negative_slope=0, mode="fan_out", nonlinearity="relu"),
                ),
            )
            names.append(name)
        for name, cin, cout in dense(cfg):
            setattr(
                self,
                name,
                nn.Dense(cin, cout, has_bias=True, weight_init=Normal(cin**-0.5), bias_init="zeros"),
            )
            names.append(name)
        if tuple(names) != _ORDER:
            raise ValueError(f"the MindSpore VGG16 expects layers {_ORDER}, got {names}")
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=POOL, stride=POOL)
        self.flatten = ops.Flatten()
        self.dropout = nn.Dropout(p=cfg["dropout"])

    def construct(self, x):
        x = self.pool(self.relu(self.conv1_2(self.relu(self.conv1_1(x)))))
        x = self.pool(self.relu(self.conv2_2(self.relu(self.conv2_1(x)))))
        x = self.relu(self.conv3_2(self.relu(self.conv3_1(x))))
        x = self.pool(self.relu(self.conv3_3(x)))
        x = self.relu(self.conv4_2(self.relu(self.conv4_1(x))))
        x = self.pool(self.relu(self.conv4_3(x)))
        x = self.relu(self.conv5_2(self.relu(self.conv5_1(x))))
        x = self.pool(self.relu(self.conv5_3(x)))
        x = self.flatten(x)  # (C, H, W) order: the canonical one
        x = self.dropout(self.relu(self.fc6(x)))
        x = self.dropout(self.relu(self.fc7(x)))
        return self.fc8(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> VGG16:
    """Logits network for ``spec``; ``seed`` calls ``mindspore.set_seed`` first."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return VGG16(cfg)
