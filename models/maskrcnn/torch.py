"""Mask R-CNN (ResNet-FPN) in PyTorch (NCHW), following ``models.maskrcnn``'s contract,
and its five-term training loss (``models.maskrcnn.reference.loss``).

torchvision is not a dependency, so RoIAlign is written here in plain tensor ops (see
``roi_align``): one ``index_select`` on the four levels' maps, flattened and stacked,
reads every sample's four bilinear corners whatever its box's level, which exports to
ONNX as one ``Gather`` and trains through ``index_add`` in backward.

Initialization, in the spirit of torchvision's Mask R-CNN trained from scratch:
the backbone as ``models.resnet.torch`` (kaiming-normal fan-out convs) but every BN at
gamma 1, beta 0, as torchvision's detection backbones (zero-gamma residuals shield a
block's first two BNs, whose gamma then moves by less than float32 resolves at 1.0 in a
short run at Detectron's small rate); FPN
convs kaiming-uniform (a = 1) with zero bias (torchvision's FPN); the RPN head
normal std 0.01, zero bias (torchvision's RPNHead); ``box_head.fc6``/``fc7``
torch's default linear init (torchvision's TwoMLPHead); ``box_predictor.cls_score``
normal std 0.01 and ``bbox_pred`` std 0.001, zero bias (Detectron's); the mask head
and predictor kaiming-normal fan-out with zero bias (torchvision's MaskRCNNHeads and
MaskRCNNPredictor).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dlbench.models import maskrcnn as M
from dlbench.models.maskrcnn.reference import SMOOTH_L1_BETA
from dlbench.models.registry import ModelSpec
from dlbench.models.resnet.torch import ResNet


class Backbone(ResNet):
    """``models.resnet.torch``'s ResNet without its classifier, returning C2..C5; the
    same module paths (``stem.conv``, ``layer1.0.conv1`` ...) under ``backbone.``.
    Every BN starts at gamma 1 (no zero-gamma residuals, as the module docstring says)."""

    def __init__(self, layers, width: int):
        super().__init__(layers, width, num_classes=1, zero_init_residual=False)
        del self.avgpool, self.fc  # a feature extractor has no classifier

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.maxpool(self.relu(self.stem(x)))
        out = []
        for name in self.stages:
            x = getattr(self, name)(x)
            out.append(x)
        return out


class FPN(nn.Module):
    def __init__(self, in_channels, channels: int):
        super().__init__()
        for level, cin in zip(M.ROI_LEVELS, in_channels):
            self.add_module(f"inner{level}", nn.Conv2d(cin, channels, 1))
            self.add_module(f"layer{level}", nn.Conv2d(channels, channels, 3, padding=1))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                nn.init.zeros_(m.bias)

    def forward(self, feats: list[torch.Tensor]) -> list[torch.Tensor]:
        """C2..C5 -> P2..P6."""
        levels = list(M.ROI_LEVELS)
        top = getattr(self, f"inner{levels[-1]}")(feats[-1])
        outs = [getattr(self, f"layer{levels[-1]}")(top)]
        for level, c in zip(reversed(levels[:-1]), reversed(feats[:-1])):
            lateral = getattr(self, f"inner{level}")(c)
            up = F.interpolate(top, scale_factor=2.0, mode="nearest")
            if up.shape[2:] != lateral.shape[2:]:  # an odd side: crop the extra row
                up = up[:, :, : lateral.shape[2], : lateral.shape[3]]
            top = lateral + up
            outs.insert(0, getattr(self, f"layer{level}")(top))
        outs.append(F.max_pool2d(outs[-1], 1, 2))  # P6: 1x1 pool, stride 2
        return outs


class RPNHead(nn.Module):
    def __init__(self, channels: int, anchors: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.cls_logits = nn.Conv2d(channels, anchors, 1)
        self.bbox_pred = nn.Conv2d(channels, 4 * anchors, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        """One level -> (B, rows * columns * A * 5): objectness then 4 deltas per anchor."""
        t = torch.relu(self.conv(p))
        z = self.cls_logits(t).permute(0, 2, 3, 1).unsqueeze(-1)  # (B, H, W, A, 1)
        d = self.bbox_pred(t).permute(0, 2, 3, 1)  # (B, H, W, 4A)
        d = d.reshape(d.shape[0], d.shape[1], d.shape[2], -1, 4)
        return torch.cat([z, d], -1).flatten(1)


def roi_levels(boxes: torch.Tensor, cfg: dict) -> torch.Tensor:
    """FPN eq. 1 as ``reference.roi_levels``: the level (2..5, int64) of each box."""
    w = boxes[..., 2] - boxes[..., 0]
    h = boxes[..., 3] - boxes[..., 1]
    scale = torch.sqrt(torch.clamp(w * h, min=0.0))
    k = torch.floor(M.CANONICAL_LEVEL + torch.log2(scale / cfg["canonical_size"] + 1e-6))
    return torch.clamp(k, M.ROI_LEVELS[0], M.ROI_LEVELS[-1]).long()


def roi_align(levels: list[torch.Tensor], boxes: torch.Tensor, cfg: dict, size: int) -> torch.Tensor:
    """``reference.roi_align`` for a batch: P2..P5 (B, C, H_l, W_l) and boxes (B, N, 4)
    in pixels -> (B * N, C, size, size).

    Every level's map, channels last, is flattened and stacked into one (B * T, C)
    table; each sample's four corners become rows of it (image offset + level offset
    + row * W_l + column), so one gather serves all boxes at all levels.  The
    out-of-map test is a product of a row and a column test, so it folds into the
    corner weights.
    """
    b, n = boxes.shape[0], boxes.shape[1]
    ratio = cfg["sampling_ratio"]
    heights = [p.shape[2] for p in levels]
    widths = [p.shape[3] for p in levels]
    sides = [hh * ww for hh, ww in zip(heights, widths)]
    table = torch.cat([p.permute(0, 2, 3, 1).reshape(b, s, p.shape[1]) for p, s in zip(levels, sides)], 1)
    total = sum(sides)
    table = table.reshape(b * total, -1)
    offsets = [sum(sides[:i]) for i in range(len(sides))]
    dev, dt = boxes.device, boxes.dtype
    which = roi_levels(boxes, cfg) - M.ROI_LEVELS[0]  # (B, N)
    scale = torch.tensor([1.0 / M.stride(lv) for lv in M.ROI_LEVELS], dtype=dt, device=dev)[which]
    hgt = torch.tensor(heights, dtype=dt, device=dev)[which]
    wid = torch.tensor(widths, dtype=dt, device=dev)[which]
    base = torch.tensor(offsets, dtype=torch.long, device=dev)[which]
    base = base + torch.arange(b, device=dev).unsqueeze(1) * total  # (B, N)

    box = boxes * scale.unsqueeze(-1) - 0.5
    steps = (torch.arange(size * ratio, dtype=dt, device=dev) + 0.5) / ratio
    ys = box[..., 1:2] + steps * ((box[..., 3:4] - box[..., 1:2]) / size)  # (B, N, S*r)
    xs = box[..., 0:1] + steps * ((box[..., 2:3] - box[..., 0:1]) / size)

    def axis(v: torch.Tensor, side: torch.Tensor):
        """Lower and upper index (int64) and their weights along one axis, zero outside."""
        side = side.unsqueeze(-1)
        inside = ((v >= -1.0) & (v <= side)).to(dt)
        v = torch.minimum(torch.clamp(v, min=0.0), side - 1)
        lo = torch.floor(v)
        hi = torch.minimum(lo + 1, side - 1)
        frac = v - lo
        return lo.long(), hi.long(), (1.0 - frac) * inside, frac * inside

    y0, y1, wy0, wy1 = axis(ys, hgt)
    x0, x1, wx0, wx1 = axis(xs, wid)
    row_w = wid.long().unsqueeze(-1)
    # (B, N, S, r, 2) per axis: bin, sample in the bin, lower/upper corner
    rows = torch.stack([y0 * row_w, y1 * row_w], -1).reshape(b, n, size, ratio, 2)
    cols = torch.stack([x0, x1], -1).reshape(b, n, size, ratio, 2)
    wy = torch.stack([wy0, wy1], -1).reshape(b, n, size, ratio, 2) / ratio
    wx = torch.stack([wx0, wx1], -1).reshape(b, n, size, ratio, 2) / ratio
    # (B, N, bin row, bin column, sample row, sample column, corner row, corner column):
    # one output value's 4 r^2 reads are adjacent, so a batched product sums them.
    index = (
        base[..., None, None, None, None, None, None]
        + rows[:, :, :, None, :, None, :, None]
        + cols[:, :, None, :, None, :, None, :]
    )
    weight = wy[:, :, :, None, :, None, :, None] * wx[:, :, None, :, None, :, None, :]
    reads = 4 * ratio * ratio
    corners = table.index_select(0, index.reshape(-1))  # (B*N*S*S*reads, C)
    c = table.shape[1]
    weight = weight.reshape(-1, 1, reads).to(corners.dtype)
    out = torch.matmul(weight, corners.reshape(-1, reads, c))
    return out.reshape(b, n, size, size, c).permute(0, 1, 4, 2, 3).reshape(b * n, c, size, size)


class MaskRCNN(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = dict(cfg)
        f, c, a = cfg["fpn_channels"], cfg["num_classes"], len(M.ASPECT_RATIOS)
        fc, mw, roi = cfg["fc_width"], cfg["mask_channels"], cfg["box_roi_size"]
        self.backbone = Backbone(cfg["layers"], cfg["width"])
        self.fpn = FPN(M.stage_channels(cfg), f)
        self.rpn = RPNHead(f, a)
        self.box_head = nn.Module()
        self.box_head.fc6 = nn.Linear(f * roi * roi, fc)
        self.box_head.fc7 = nn.Linear(fc, fc)
        self.box_predictor = nn.Module()
        self.box_predictor.cls_score = nn.Linear(fc, c)
        self.box_predictor.bbox_pred = nn.Linear(fc, 4 * c)
        self.mask_head = nn.Module()
        for i in range(1, M.MASK_CONVS + 1):
            self.mask_head.add_module(f"mask_fcn{i}", nn.Conv2d(f if i == 1 else mw, mw, 3, padding=1))
        self.mask_predictor = nn.Module()
        self.mask_predictor.conv5_mask = nn.ConvTranspose2d(mw, mw, 2, stride=2)
        self.mask_predictor.mask_fcn_logits = nn.Conv2d(mw, c, 1)
        for m in (*self.mask_head.modules(), *self.mask_predictor.modules()):
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
        for layer, std in ((self.box_predictor.cls_score, 0.01), (self.box_predictor.bbox_pred, 0.001)):
            nn.init.normal_(layer.weight, std=std)
            nn.init.zeros_(layer.bias)

    def forward(self, image: torch.Tensor, rois: torch.Tensor, mask_rois: torch.Tensor) -> torch.Tensor:
        """(B, 3, S, S), (B, R, 4), (B, D, 4) -> logits (B, L) in ``output_layout`` order."""
        cfg, batch = self.cfg, image.shape[0]
        p = self.fpn(self.backbone(image))
        parts = [self.rpn(level) for level in p]
        feats = p[: len(M.ROI_LEVELS)]

        x = roi_align(feats, rois.float(), cfg, cfg["box_roi_size"]).flatten(1)
        x = torch.relu(self.box_head.fc7(torch.relu(self.box_head.fc6(x))))
        box = torch.cat([self.box_predictor.cls_score(x), self.box_predictor.bbox_pred(x)], 1)
        parts.append(box.unflatten(0, (batch, -1)).flatten(1))

        m = roi_align(feats, mask_rois.float(), cfg, cfg["mask_roi_size"])
        for i in range(1, M.MASK_CONVS + 1):
            m = torch.relu(getattr(self.mask_head, f"mask_fcn{i}")(m))
        m = torch.relu(self.mask_predictor.conv5_mask(m))
        m = self.mask_predictor.mask_fcn_logits(m)
        parts.append(m.unflatten(0, (batch, -1)).flatten(1))
        return torch.cat(parts, 1).float()


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> MaskRCNN:
    """The network for ``spec``; ``seed`` seeds torch's global generator first."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return MaskRCNN(cfg)


def instance_segmentation_loss(outputs: torch.Tensor, labels) -> torch.Tensor:
    """``reference.loss``: the five terms' sum.  The spec is not passed, so the logits
    are split by the labels' shapes: A anchors, R boxes, D mask boxes of M x M, and
    classes C = (L - 5A) / (5R + D M M)."""
    rpn_lab, rpn_tgt, roi_lab, roi_tgt, mask_cls, mask_tgt = (t.float() for t in labels)
    z = outputs.float()
    b, width = z.shape
    a, r = rpn_lab.shape[1], roi_lab.shape[1]
    d, m = mask_tgt.shape[1], mask_tgt.shape[-1]
    c = (width - 5 * a) // (5 * r + d * m * m)
    if 5 * a + c * (5 * r + d * m * m) != width:
        raise ValueError(
            f"logits of width {width} do not fit {a} anchors, {r} boxes and {d} masks of {m}x{m}"
        )
    rpn = z[:, : 5 * a].reshape(b, a, 5)
    box = z[:, 5 * a : 5 * a + 5 * c * r].reshape(b, r, 5 * c)
    masks = z[:, 5 * a + 5 * c * r :].reshape(b, d, c, m, m)

    sampled = (rpn_lab >= 0).float()
    n_rpn = sampled.sum().clamp(min=1)
    bce = F.binary_cross_entropy_with_logits(rpn[..., 0], rpn_lab.clamp(min=0), reduction="none")
    rpn_obj = (bce * sampled).sum() / n_rpn
    smooth = F.smooth_l1_loss(rpn[..., 1:], rpn_tgt, reduction="none", beta=SMOOTH_L1_BETA)
    rpn_box = (smooth.sum(-1) * (rpn_lab == 1).float()).sum() / n_rpn

    valid = (roi_lab >= 0).float()
    n_roi = valid.sum().clamp(min=1)
    lab = roi_lab.long().clamp(min=0)
    logp = torch.log_softmax(box[..., :c], -1)
    ce = -logp.gather(-1, lab.unsqueeze(-1)).squeeze(-1)
    deltas = box[..., c:].reshape(b, r, c, 4)
    picked = deltas.gather(2, lab[:, :, None, None].expand(b, r, 1, 4)).squeeze(2)
    smooth = F.smooth_l1_loss(picked, roi_tgt, reduction="none", beta=SMOOTH_L1_BETA)
    box_class = (ce * valid).sum() / n_roi
    box_delta = (smooth.sum(-1) * (roi_lab > 0).float()).sum() / n_roi

    mcls = mask_cls.long()
    mvalid = (mcls > 0).float()
    mz = masks.gather(2, mcls.clamp(0, c - 1)[:, :, None, None, None].expand(b, d, 1, m, m))
    mbce = F.binary_cross_entropy_with_logits(mz.squeeze(2), mask_tgt, reduction="none")
    mask = (mbce.sum((-1, -2)) * mvalid).sum() / (mvalid.sum() * m * m).clamp(min=1)
    return rpn_obj + rpn_box + box_class + box_delta + mask
