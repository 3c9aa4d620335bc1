"""SSD300 in PyTorch (NCHW), following ``models.ssd.backbone`` and ``models.ssd.heads``,
and its multibox loss.

Module names (``conv1_1`` ... ``conv11_2``, ``conv4_3_norm``, ``<source>_loc``,
``<source>_conf``) are the canonical names ``models.weights`` maps across frameworks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models import ssd
from dlbench.models.registry import ModelSpec

# Backbone convs a 2x2/2 max pool follows (pool3 rounds up: ceil_mode).
_POOLED = {"conv1_2", "conv2_2", "conv3_3", "conv4_3"}


class L2Norm(nn.Module):
    """conv4_3's channel-wise L2 normalization times a learned per-channel scale."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.full((channels,), ssd.L2NORM_SCALE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = x.pow(2).sum(1, keepdim=True).sqrt() + ssd.L2NORM_EPS
        return x / norm * self.weight.view(1, -1, 1, 1)


class SSD(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.order = []
        for name, cin, cout, k, stride, dil, pad, _ in ssd.backbone(cfg):
            self.add_module(name, nn.Conv2d(cin, cout, k, stride, pad, dilation=dil))
            self.order.append(name)
        self.conv4_3_norm = L2Norm(cfg["stages"][3][-1])
        self.heads = []
        for name, cin, cout, _ in ssd.heads(cfg):
            self.add_module(name, nn.Conv2d(cin, cout, 3, padding=1))
            self.heads.append(name)
        self.pool = nn.MaxPool2d(2)
        self.pool3 = nn.MaxPool2d(2, ceil_mode=True)
        self.pool5 = nn.MaxPool2d(3, 1, 1)
        self.classes = cfg["num_classes"]
        for m in self.modules():  # models.vgg's conv init, repeated by every builder
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def _flat(self, y: torch.Tensor, width: int) -> torch.Tensor:
        """(B, boxes * width, H, W) -> (B, H * W * boxes, width): (row, column, box) order."""
        return y.permute(0, 2, 3, 1).reshape(y.shape[0], -1, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = {}
        for name in self.order:
            x = torch.relu(getattr(self, name)(x))
            if name in ssd.SOURCES:
                found[name] = self.conv4_3_norm(x) if name == "conv4_3" else x
            if name in _POOLED:
                x = (self.pool3 if name == "conv3_3" else self.pool)(x)
            elif name == "conv5_3":
                x = self.pool5(x)
        loc = [self._flat(getattr(self, f"{s}_loc")(found[s]), 4) for s in ssd.SOURCES]
        conf = [self._flat(getattr(self, f"{s}_conf")(found[s]), self.classes) for s in ssd.SOURCES]
        return torch.cat([torch.cat(loc, 1), torch.cat(conf, 1)], 2)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> SSD:
    """The network for ``spec``; ``seed`` seeds torch's global generator first."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return SSD(cfg)


def detection_loss(outputs: torch.Tensor, labels, neg_pos_ratio: int = 3) -> torch.Tensor:
    """Multibox loss (``models.ssd.boxes.multibox_loss``): smooth-L1 on positives plus
    cross-entropy on positives and hard negatives (torch.sort), over the positives."""
    cls_t, loc_t = labels
    z = outputs.float()
    y = cls_t.long()
    pos = y > 0
    logp = torch.log_softmax(z[..., 4:], -1)
    ce = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    smooth = nn.functional.smooth_l1_loss(z[..., :4], loc_t.float(), reduction="none").sum(-1)
    with torch.no_grad():
        mining = torch.where(pos, torch.zeros_like(ce), -logp[..., 0])
        n_pos = pos.sum(1, keepdim=True)
        k = torch.minimum(neg_pos_ratio * n_pos, pos.shape[1] - n_pos)
        ranked = mining.sort(1, descending=True).values
        kth = ranked.gather(1, (k - 1).clamp(min=0))
        neg = (mining >= kth) & (k > 0) & ~pos
    total = (ce * (pos | neg)).sum() + (smooth * pos).sum()
    return total / pos.sum().clamp(min=1)
