"""Mask R-CNN in MindSpore (NCHW), following ``models.maskrcnn``, and its training loss.

Everything runs in GRAPH_MODE, as the zoo's MindSpore sessions and inference backend
compile it: shapes are the spec's (static), and every per-box choice (the FPN level,
the clamping, out-of-range samples) is arithmetic and masks, never Python branches.
Cell paths are the canonical weight names: the backbone is ``models.resnet``'s
MindSpore ``Stem`` and ``Bottleneck`` cells under ``backbone.``.

What keeps the exported ONNX graph exact and batch-independent (MindSpore's exporter
writes every traced shape as a constant), none of it changing the math:

* RoIAlign (``reference.roi_align``) reads P2..P5 flattened and concatenated per
  image, (batch, cells, channels): each bilinear corner of every sample of every box
  is one gather whatever the box's level (its level's offset is in the index).  In
  MindSpore that is a row ``Gather`` on the batch-flattened table, the image's first
  row ``b * cells`` from ``arange`` of the static batch.  Exported, that constant
  would fix the batch (and ``CumSum``, which could derive it from the input, does not
  export), so ``onnx_rewrites`` switches the RoIAlign cells to ``GatherElements``
  inside each image, its index broadcast over the channels by an addition: exact
  too, but slower: the box RoIAlign of the full ``maskrcnn`` (1000 boxes, batch 1,
  2 loaded CPU cores) took 4.4 s against 1.1 s, peaking at 7.9 GB against 4.5 GB.
* The dense layers are ``models.gnmt``'s ``SeqDense`` (one MatMul over any leading
  axes; ``nn.Dense`` reshapes back to the traced batch).
* The mask head's 2x2 stride-2 transposed conv (``Deconv2x2``) is a 1x1 conv to
  4 x channels and a depth-to-space: with kernel = stride the output pixels do not
  overlap, so it is the same sum.  MindSpore 2.8's exporter writes ``ConvTranspose``
  with a 4-D ``output_shape`` attribute (ONNX wants the spatial two) that ONNX
  Runtime refuses to load, and it would bake the traced batch in.

Initialization, in the spirit of torchvision's Mask R-CNN: the backbone as the zoo's
ResNet (kaiming normal fan_out) but every BN at gamma 1, as torchvision's detection
backbones (see ``models.maskrcnn.torch``); FPN convs kaiming
uniform (a = 1), zero bias; the RPN head normal std 0.01, zero bias; ``fc6``/``fc7``
kaiming uniform (a = sqrt 5, PyTorch's Linear default) with zero bias; the box
predictor normal std 0.01 (classes) and 0.001 (deltas), zero bias (Detectron2); the
mask head and predictor kaiming normal fan_out, zero bias.
"""

from __future__ import annotations

import math
import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.common.initializer import HeNormal, HeUniform, Normal

from dlbench.models import maskrcnn as M
from dlbench.models.gnmt.mindspore import SeqDense
from dlbench.models.maskrcnn import reference as ref
from dlbench.models.maskrcnn.mindspore_roi import RoIAlign
from dlbench.models.registry import ModelSpec
from dlbench.models.resnet import EXPANSION
from dlbench.models.resnet.mindspore import Bottleneck, Stem

_FAN_OUT = dict(negative_slope=0, mode="fan_out", nonlinearity="relu")


def _conv(cin, cout, k, init) -> nn.Conv2d:
    return nn.Conv2d(
        cin,
        cout,
        k,
        pad_mode="pad" if k > 1 else "valid",
        padding=k // 2,
        has_bias=True,
        weight_init=init,
        bias_init="zeros",
    )


class Backbone(nn.Cell):
    """The zoo's ResNet without its classifier; returns C2..C5."""

    def __init__(self, layers, width: int):
        super().__init__()
        self.stem = Stem(width)
        cin, stages = width, []
        for stage, blocks in enumerate(layers):
            planes, cells = width * 2**stage, []
            for b in range(blocks):
                cells.append(
                    Bottleneck(
                        cin,
                        planes,
                        2 if (stage > 0 and b == 0) else 1,
                        downsample=(b == 0),
                        zero_init_residual=False,
                    )
                )
                cin = planes * EXPANSION
            stages.append(nn.SequentialCell(cells))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages

    def construct(self, x):
        c2 = self.layer1(self.stem(x))
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        return c2, c3, c4, self.layer4(c4)


class FPN(nn.Cell):
    """Laterals, nearest 2x top-down sums, 3x3 output convs; P6 a 1x1/2 max pool of P5."""

    def __init__(self, channels, f: int, sizes: dict):
        super().__init__()
        init = HeUniform(negative_slope=1)
        self.inner2, self.inner3, self.inner4, self.inner5 = (_conv(c, f, 1, init) for c in channels)
        self.layer2, self.layer3, self.layer4, self.layer5 = (_conv(f, f, 3, init) for _ in channels)
        # The levels halve exactly (even sides down to P5): nearest 2x is a tile.
        if any(sizes[lv - 1] != 2 * sizes[lv] for lv in (3, 4, 5)):
            raise ValueError(f"image_size: the FPN levels {sizes} must halve exactly")
        self.pool = nn.MaxPool2d(kernel_size=1, stride=2, pad_mode="valid")  # ceil for k=1

    @staticmethod
    def _up(x):
        """Nearest 2x as reshape and Tile: the exporter writes ResizeNearestNeighbor's
        sizes as the traced (batch, channels, rows, columns)."""
        c, h, w = x.shape[1], x.shape[2], x.shape[3]
        x = ops.tile(ops.reshape(x, (-1, c, h, 1, w, 1)), (1, 1, 1, 2, 1, 2))
        return ops.reshape(x, (-1, c, 2 * h, 2 * w))

    def construct(self, c2, c3, c4, c5):
        t5 = self.inner5(c5)
        t4 = self.inner4(c4) + self._up(t5)
        t3 = self.inner3(c3) + self._up(t4)
        t2 = self.inner2(c2) + self._up(t3)
        p5 = self.layer5(t5)
        return self.layer2(t2), self.layer3(t3), self.layer4(t4), p5, self.pool(p5)


class RPNHead(nn.Cell):
    """Shared by P2..P6; one level's (batch, rows * columns * A * 5) block."""

    def __init__(self, f: int, anchors: int):
        super().__init__()
        self.conv = _conv(f, f, 3, Normal(0.01))
        self.cls_logits = _conv(f, anchors, 1, Normal(0.01))
        self.bbox_pred = _conv(f, 4 * anchors, 1, Normal(0.01))
        self.relu = nn.ReLU()
        self.a = anchors

    def construct(self, x):
        t = self.relu(self.conv(x))
        h, w, a = x.shape[2], x.shape[3], self.a
        cls = ops.reshape(ops.transpose(self.cls_logits(t), (0, 2, 3, 1)), (-1, h, w, a, 1))
        box = ops.reshape(ops.transpose(self.bbox_pred(t), (0, 2, 3, 1)), (-1, h, w, a, 4))
        return ops.reshape(ops.concat((cls, box), 4), (-1, h * w * a * 5))


class BoxHead(nn.Cell):
    def __init__(self, cin: int, fc: int):
        super().__init__()
        self.fc6 = SeqDense(cin, fc, weight_init=HeUniform(math.sqrt(5)), bias_init="zeros")
        self.fc7 = SeqDense(fc, fc, weight_init=HeUniform(math.sqrt(5)), bias_init="zeros")
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.fc7(self.relu(self.fc6(x))))


class BoxPredictor(nn.Cell):
    def __init__(self, fc: int, classes: int):
        super().__init__()
        self.cls_score = SeqDense(fc, classes, weight_init=Normal(0.01), bias_init="zeros")
        self.bbox_pred = SeqDense(fc, 4 * classes, weight_init=Normal(0.001), bias_init="zeros")

    def construct(self, x):
        return ops.concat((self.cls_score(x), self.bbox_pred(x)), -1)


class MaskHead(nn.Cell):
    def __init__(self, f: int, width: int):
        super().__init__()
        init = HeNormal(**_FAN_OUT)
        self.mask_fcn1 = _conv(f, width, 3, init)
        self.mask_fcn2, self.mask_fcn3, self.mask_fcn4 = (_conv(width, width, 3, init) for _ in range(3))
        self.relu = nn.ReLU()

    def construct(self, x):
        x = self.relu(self.mask_fcn2(self.relu(self.mask_fcn1(x))))
        return self.relu(self.mask_fcn4(self.relu(self.mask_fcn3(x))))


class Deconv2x2(nn.Conv2dTranspose):
    """``nn.Conv2dTranspose`` (kernel 2, stride 2; same weight (in, out, 2, 2) and bias)
    computed as a 1x1 conv to (out, 2, 2) channels and a depth-to-space (module doc)."""

    def __init__(self, cin: int, cout: int, weight_init):
        super().__init__(cin, cout, 2, stride=2, has_bias=True, weight_init=weight_init, bias_init="zeros")
        self.cout = cout

    def construct(self, x):
        h, w, o = x.shape[2], x.shape[3], self.cout
        kernel = ops.reshape(ops.transpose(self.weight, (1, 2, 3, 0)), (o * 4, -1, 1, 1))
        y = ops.reshape(ops.conv2d(x, kernel), (-1, o, 2, 2, h, w))
        y = ops.reshape(ops.transpose(y, (0, 1, 4, 2, 5, 3)), (-1, o, 2 * h, 2 * w))
        return y + ops.reshape(self.bias, (1, -1, 1, 1))


class MaskPredictor(nn.Cell):
    def __init__(self, width: int, classes: int):
        super().__init__()
        self.conv5_mask = Deconv2x2(width, width, HeNormal(**_FAN_OUT))
        self.mask_fcn_logits = _conv(width, classes, 1, HeNormal(**_FAN_OUT))
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.mask_fcn_logits(self.relu(self.conv5_mask(x)))


class MaskRCNN(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        f, a = cfg["fpn_channels"], len(M.ASPECT_RATIOS)
        self.backbone = Backbone(cfg["layers"], cfg["width"])
        self.fpn = FPN(M.stage_channels(cfg), f, M.level_sizes(cfg))
        self.rpn = RPNHead(f, a)
        self.box_roi = RoIAlign(cfg, cfg["box_roi_size"])
        self.mask_roi = RoIAlign(cfg, cfg["mask_roi_size"])
        self.box_head = BoxHead(f * cfg["box_roi_size"] ** 2, cfg["fc_width"])
        self.box_predictor = BoxPredictor(cfg["fc_width"], cfg["num_classes"])
        self.mask_head = MaskHead(f, cfg["mask_channels"])
        self.mask_predictor = MaskPredictor(cfg["mask_channels"], cfg["num_classes"])
        self.box_width = 5 * cfg["num_classes"]

    @staticmethod
    def _flat(p):
        return ops.reshape(ops.transpose(p, (0, 2, 3, 1)), (-1, p.shape[2] * p.shape[3], p.shape[1]))

    def construct(self, image, rois, mask_rois):
        c2, c3, c4, c5 = self.backbone(image)
        p2, p3, p4, p5, p6 = self.fpn(c2, c3, c4, c5)
        flat = ops.concat((self._flat(p2), self._flat(p3), self._flat(p4), self._flat(p5)), 1)
        r, d = rois.shape[1], mask_rois.shape[1]
        feats = self.box_roi(flat, rois)  # (B, R, F, 7, 7)
        feats = ops.reshape(feats, (-1, r, feats.shape[2] * feats.shape[3] * feats.shape[4]))
        box = ops.reshape(self.box_predictor(self.box_head(feats)), (-1, r * self.box_width))
        feats = self.mask_roi(flat, mask_rois)  # (B, D, F, 14, 14)
        feats = ops.reshape(feats, (-1, feats.shape[2], feats.shape[3], feats.shape[4]))
        mask = self.mask_predictor(self.mask_head(feats))  # (B*D, C, 28, 28)
        mask = ops.reshape(mask, (-1, d * mask.shape[1] * mask.shape[2] * mask.shape[3]))
        return ops.concat(
            (self.rpn(p2), self.rpn(p3), self.rpn(p4), self.rpn(p5), self.rpn(p6), box, mask), 1
        )


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> MaskRCNN:
    """The network for ``spec``; ``seed`` calls ``mindspore.set_seed`` first."""
    cfg = spec.config_with(overrides)
    if len(cfg["layers"]) != 4:
        raise ValueError("the Mask R-CNN backbone has exactly four stages")
    if seed is not None:
        ms.set_seed(seed)
    return MaskRCNN(cfg)


def forward_macs(model: MaskRCNN, spec: ModelSpec) -> int:
    """Multiply-adds of one sample, from hooks on every conv, dense layer and the
    transposed conv at the shapes they produce (a batch-1 PyNative forward): the
    per-box layers run on (boxes, ...) so their leading axis is the box count, and
    the shared RPN head's convs fire once per level."""
    from dlbench.models.counting.mindspore import one_sample, trace

    macs = []

    def conv_hook(cell, _args, out):
        k = cell.kernel_size
        kh, kw = (k, k) if isinstance(k, int) else k[:2]
        n, _, oh, ow = out.shape
        per_pixel = kh * kw * (cell.in_channels // cell.group) * cell.out_channels
        if isinstance(cell, Deconv2x2):  # k*k*cout per input pixel and channel
            oh, ow = oh // 2, ow // 2
        macs.append(n * oh * ow * per_pixel)

    def dense_hook(cell, _args, out):
        macs.append(int(np.prod(out.shape[:-1])) * cell.in_channels * cell.out_channels)

    handles = []
    for _, cell in model.cells_and_names():
        if isinstance(cell, (nn.Conv2d, Deconv2x2)):
            handles.append(cell.register_forward_hook(conv_hook))
        elif isinstance(cell, nn.Dense):
            handles.append(cell.register_forward_hook(dense_hook))
    trace(model, handles, one_sample(spec))
    return int(sum(macs))


def _bce(z, y):
    """Binary cross-entropy with logits, stable: max(z, 0) - z*y + log(1 + exp(-|z|))."""
    return ops.maximum(z, 0.0) - z * y + ops.log1p(ops.exp(-ops.abs(z)))


def _smooth_l1(d, beta: float):
    a = ops.abs(d)
    return ops.select(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)


class InstanceSegmentationLoss(nn.Cell):
    """``reference.loss`` (the five terms' sum) in MindSpore ops, float32.

    It is called without the spec, so the logits are split from the labels' shapes:
    A anchors, R boxes, D mask boxes of M x M, and C = (L - 5A) / (5R + D M M)
    classes.  Picking a class's deltas or mask is a one-hot product (no gather on
    labels), and unsampled or padded rows are zeroed by masks, not skipped."""

    def __init__(self):
        super().__init__()
        self.beta = ref.SMOOTH_L1_BETA

    def construct(
        self, outputs, rpn_labels, rpn_targets, roi_labels, roi_targets, mask_classes, mask_targets
    ):
        z = ops.cast(outputs, ms.float32)
        a, r, d, m = rpn_labels.shape[1], roi_labels.shape[1], mask_classes.shape[1], mask_targets.shape[2]
        c = (z.shape[1] - 5 * a) // (5 * r + d * m * m)
        one, zero = ms.Tensor(1.0, ms.float32), ms.Tensor(0.0, ms.float32)

        rpn = ops.reshape(z[:, : 5 * a], (-1, a, 5))
        sampled = ops.cast(rpn_labels >= 0, ms.float32)
        n_rpn = ops.maximum(ops.reduce_sum(sampled), 1.0)
        objectness = ops.reduce_sum(_bce(rpn[:, :, 0], rpn_labels) * sampled) / n_rpn
        positive = ops.cast(rpn_labels == 1, ms.float32)
        rpn_box = (
            ops.reduce_sum(ops.reduce_sum(_smooth_l1(rpn[:, :, 1:] - rpn_targets, self.beta), -1) * positive)
            / n_rpn
        )

        box = ops.reshape(z[:, 5 * a : 5 * a + 5 * r * c], (-1, r, 5 * c))
        valid = ops.cast(roi_labels >= 0, ms.float32)
        n_roi = ops.maximum(ops.reduce_sum(valid), 1.0)
        label = ops.one_hot(ops.cast(ops.maximum(roi_labels, 0.0), ms.int32), c, one, zero)
        ce = -ops.reduce_sum(ops.log_softmax(box[:, :, :c], -1) * label, -1)
        box_class = ops.reduce_sum(ce * valid) / n_roi
        deltas = ops.reduce_sum(ops.reshape(box[:, :, c:], (-1, r, c, 4)) * ops.expand_dims(label, -1), 2)
        foreground = ops.cast(roi_labels > 0, ms.float32)
        box_delta = (
            ops.reduce_sum(ops.reduce_sum(_smooth_l1(deltas - roi_targets, self.beta), -1) * foreground)
            / n_roi
        )

        masks = ops.reshape(z[:, 5 * a + 5 * r * c :], (-1, d, c, m, m))
        cls = ops.cast(mask_classes, ms.int32)
        pick = ops.reshape(ops.one_hot(cls, c, one, zero), (-1, d, c, 1, 1))
        mz = ops.reduce_sum(masks * pick, 2)  # (B, D, M, M)
        used = ops.cast(cls > 0, ms.float32)
        n_mask = ops.maximum(ops.reduce_sum(used) * (m * m), 1.0)
        mask = ops.reduce_sum(ops.reduce_sum(_bce(mz, mask_targets), (2, 3)) * used) / n_mask
        return objectness + rpn_box + box_class + box_delta + mask


def onnx_rewrites(net: MaskRCNN) -> list[str]:
    """``converters.mindspore_to_onnx``'s family hook: RoIAlign by GatherElements, whose
    graph takes any batch (module doc); the verifier still judges the file against the
    network as built."""
    done = []
    for name, cell in net.cells_and_names():
        if isinstance(cell, RoIAlign) and cell.rows:
            cell.rows = False
            done.append(
                f"{name}: RoIAlign row Gather (batch offsets of the traced batch) -> "
                f"GatherElements per image (batch-independent)"
            )
    return done
