"""SSD300 in MindSpore (NCHW), following ``models.ssd``, and its multibox loss.

``construct`` spells the layers out by attribute name, as ``models.vgg``'s
MindSpore builder does (GRAPH_MODE compiles the source; plain attributes keep
the canonical parameter names).  Padded max pools are written as a zero
``ops.Pad`` and a valid pool: MindSpore's padded ``MaxPool2d`` exports to no
ONNX operator, and after a ReLU a zero never wins a window, so the result is
the same.  ``pool3`` pads one row and column at the bottom/right when its input
is odd (PyTorch's ``ceil_mode``); ``pool5`` pads one on every side.
"""

from __future__ import annotations

import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.common.initializer import HeNormal

from dlbench.models import ssd
from dlbench.models.registry import ModelSpec


class L2Norm(nn.Cell):
    """conv4_3's channel-wise L2 normalization times a learned per-channel scale."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.full(channels, ssd.L2NORM_SCALE, np.float32)), name="weight")
        self.sum = ops.ReduceSum(keep_dims=True)

    def construct(self, x):
        norm = ops.sqrt(self.sum(x * x, 1)) + ssd.L2NORM_EPS
        return x / norm * self.weight.reshape(1, -1, 1, 1)


class PadPool(nn.Cell):
    """Zero padding (top, bottom, left, right) then a valid max pool."""

    def __init__(self, kernel: int, stride: int, pads: tuple[int, int, int, int]):
        super().__init__()
        self.pad = ops.Pad(((0, 0), (0, 0), pads[:2], pads[2:]))
        self.pool = nn.MaxPool2d(kernel_size=kernel, stride=stride, pad_mode="valid")

    def construct(self, x):
        return self.pool(self.pad(x))


class SSD(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        init = HeNormal(negative_slope=0, mode="fan_out", nonlinearity="relu")

        def conv(cin, cout, k, stride=1, dil=1, pad=1):
            return nn.Conv2d(
                cin,
                cout,
                k,
                stride,
                pad_mode="pad" if pad else "valid",
                padding=pad,
                dilation=dil,
                has_bias=True,
                weight_init=init,
                bias_init="zeros",
            )

        sizes = {}
        for name, cin, cout, k, stride, dil, pad, hw in ssd.backbone(cfg):
            setattr(self, name, conv(cin, cout, k, stride, dil, pad))
            sizes[name] = hw
        for name, cin, cout, _ in ssd.heads(cfg):
            setattr(self, name, conv(cin, cout, 3))
        self.conv4_3_norm = L2Norm(cfg["stages"][3][-1])
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2, pad_mode="valid")
        odd = sizes["conv3_3"] % 2
        self.pool3 = PadPool(2, 2, (0, odd, 0, odd))
        self.pool5 = PadPool(3, 1, (1, 1, 1, 1))
        self.classes = cfg["num_classes"]

    def _c(self, layer, x):
        return self.relu(layer(x))

    def _flat(self, y, width: int):
        """(B, boxes * width, H, W) -> (B, H * W * boxes, width): (row, column, box).
        The batch is the reshape's -1: the ONNX exporter writes the shape it is given,
        so a traced batch would be baked into the file."""
        n = y.shape[1] * y.shape[2] * y.shape[3] // width
        return ops.reshape(ops.transpose(y, (0, 2, 3, 1)), (-1, n, width))

    def construct(self, x):
        x = self.pool(self._c(self.conv1_2, self._c(self.conv1_1, x)))
        x = self.pool(self._c(self.conv2_2, self._c(self.conv2_1, x)))
        x = self._c(self.conv3_3, self._c(self.conv3_2, self._c(self.conv3_1, x)))
        x = self.pool3(x)
        s1 = self._c(self.conv4_3, self._c(self.conv4_2, self._c(self.conv4_1, x)))
        x = self.pool(s1)
        s1 = self.conv4_3_norm(s1)
        x = self._c(self.conv5_3, self._c(self.conv5_2, self._c(self.conv5_1, x)))
        x = self.pool5(x)
        s2 = self._c(self.conv7, self._c(self.conv6, x))
        s3 = self._c(self.conv8_2, self._c(self.conv8_1, s2))
        s4 = self._c(self.conv9_2, self._c(self.conv9_1, s3))
        s5 = self._c(self.conv10_2, self._c(self.conv10_1, s4))
        s6 = self._c(self.conv11_2, self._c(self.conv11_1, s5))
        c = self.classes
        loc = ops.concat(
            (
                self._flat(self.conv4_3_loc(s1), 4),
                self._flat(self.conv7_loc(s2), 4),
                self._flat(self.conv8_2_loc(s3), 4),
                self._flat(self.conv9_2_loc(s4), 4),
                self._flat(self.conv10_2_loc(s5), 4),
                self._flat(self.conv11_2_loc(s6), 4),
            ),
            1,
        )
        conf = ops.concat(
            (
                self._flat(self.conv4_3_conf(s1), c),
                self._flat(self.conv7_conf(s2), c),
                self._flat(self.conv8_2_conf(s3), c),
                self._flat(self.conv9_2_conf(s4), c),
                self._flat(self.conv10_2_conf(s5), c),
                self._flat(self.conv11_2_conf(s6), c),
            ),
            1,
        )
        return ops.concat((loc, conf), 2)


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> SSD:
    """The network for ``spec``; ``seed`` calls ``mindspore.set_seed`` first."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return SSD(cfg)


class DetectionLoss(nn.Cell):
    """Multibox loss (``models.ssd.boxes.multibox_loss``) in MindSpore ops: hard
    negatives by ``ops.sort`` and the k-th largest background loss per image."""

    def __init__(self, neg_pos_ratio: int = 3):
        super().__init__()
        self.ratio = neg_pos_ratio
        self.sum, self.sum_keep = ops.ReduceSum(), ops.ReduceSum(keep_dims=True)

    def construct(self, outputs, cls_t, loc_t):
        z = ops.cast(outputs, ms.float32)
        y = ops.cast(cls_t, ms.int32)
        pos = y > 0
        posf = ops.cast(pos, ms.float32)
        logp = ops.log_softmax(z[:, :, 4:], -1)
        onehot = ops.one_hot(y, logp.shape[-1], ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32))
        ce = -self.sum(logp * onehot, -1)
        d = ops.abs(z[:, :, :4] - loc_t)
        smooth = self.sum(ops.where(d < 1.0, 0.5 * d * d, d - 0.5), -1)
        mining = ops.stop_gradient(-logp[:, :, 0] * (1.0 - posf))
        n_pos = ops.cast(self.sum_keep(posf, 1), ms.int32)
        k = ops.minimum(self.ratio * n_pos, y.shape[1] - n_pos)
        ranked, _ = ops.sort(mining, 1, True)
        kth = ops.gather_elements(ranked, 1, ops.maximum(k - 1, 0))
        negf = ops.cast(mining >= kth, ms.float32) * ops.cast(k > 0, ms.float32) * (1.0 - posf)
        total = self.sum(ce * ops.maximum(posf, negf)) + self.sum(smooth * posf)
        return total / ops.maximum(self.sum(posf), 1.0)
