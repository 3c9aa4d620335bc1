"""Mask R-CNN (He, Gkioxari, Dollár and Girshick 2017, "Mask R-CNN", ICCV) with a
ResNet-FPN backbone (Lin et al. 2017, "Feature Pyramid Networks for Object
Detection"), in Detectron's COCO configuration, written once per framework here.

The seed names ResNet-101-FPN; the default ``maskrcnn`` is ResNet-50-FPN (the
configuration most published CPU/GPU figures use) and ``maskrcnn-r101`` is the
seed's size, same code.  ``maskrcnn-mini`` keeps every layer at 1/8 width on
128px images with 7 classes for the tests.

The network
-----------
* Backbone: ``models.resnet``'s ResNet v1.5 (stem, ``layer1`` .. ``layer4``,
  same layer names under ``backbone.``), its classifier dropped; C2..C5 are the
  four stages' outputs (strides 4, 8, 16, 32).  Batch norm trains, as in the zoo's
  ResNets (Detectron freezes it; the multiply-adds are the same).
* FPN: a 1x1 lateral conv with bias on each of C2..C5 (``fpn.inner{2..5}``, to
  ``fpn_channels``), the top-down path adding the coarser level upsampled 2x
  (nearest), a 3x3 conv with bias on each sum (``fpn.layer{2..5}``): P2..P5;
  P6 = 1x1 max pool, stride 2, of P5 (ceil: 25 -> 13 at 800px).
* RPN head, shared by P2..P6: ``rpn.conv`` 3x3 with bias and ReLU, then
  ``rpn.cls_logits`` (1x1, A = 3 anchors a cell) and ``rpn.bbox_pred`` (1x1, 4A,
  channel a * 4 + coordinate).
* RoIAlign (``models.maskrcnn.reference.roi_align``, the one definition every
  framework follows, in plain ops): Detectron2's aligned variant (half-pixel
  offset), sampling ratio 2, each box read from ONE level by FPN's eq. 1,
  ``k = floor(4 + log2(sqrt(w * h) / canonical_size))`` clamped to 2..5.
* Box head: RoIAlign 7x7 on ``rois``, flattened in (channel, row, column) order,
  ``box_head.fc6`` and ``box_head.fc7`` (``fc_width``, ReLU), then
  ``box_predictor.cls_score`` (classes) and ``box_predictor.bbox_pred``
  (4 x classes, channel c * 4 + coordinate).
* Mask head: RoIAlign 14x14 on ``mask_rois``, four 3x3 convs with bias and ReLU
  (``mask_head.mask_fcn{1..4}``), ``mask_predictor.conv5_mask`` (2x2 transposed
  conv, stride 2, bias, ReLU) and ``mask_predictor.mask_fcn_logits`` (1x1 conv to
  classes): one 28x28 mask logit map per class.

Inputs and output: what is inside the graph
-------------------------------------------
Three inputs: ``image`` (3, S, S), ``rois`` (R, 4) and ``mask_rois`` (D, 4), boxes
as pixel corners (x0, y0, x1, y1).  The graph is the network's raw heads on given
boxes; everything that selects boxes is OUTSIDE it, in numpy
(``models.maskrcnn.boxes``, ``.inference``): RPN anchor decoding and proposal NMS, box decoding,
per-class NMS and mask pasting.  Selections (top-k, NMS) are discontinuous: inside
one graph a tie broken differently by an exported or INT8 model would swap whole
rows and no comparator could tell a broken conversion from a tie.  With boxes as
inputs every hop is verified on the raw heads, as the issue asks, and the compute
is the paper's: the box head on R = 1000 proposals and the mask head on D = 100
detections at inference.  In training the boxes are sampled before the clock from
jittered ground truth and background boxes (the paper samples them from the RPN's
current proposals) with their targets, so a training step is backbone + FPN + RPN +
both heads and the five losses (``reference.loss``), without proposal selection.

One output ``logits`` (batch, L), the heads flattened per sample and concatenated
in this order (``output_layout``):

1. RPN: for each level P2..P6, (rows, columns, A, 5): objectness logit, then the
   four deltas (dx, dy, dw, dh) of anchor a at that cell;
2. box head: (R, classes + 4 x classes): class logits, then the deltas;
3. mask head: (D, classes, 28, 28) mask logits.

Counts are analytic (``walk``): convs, the transposed conv, dense layers and batch
norm; RoIAlign, pooling, upsampling and additions count no multiply-adds.  The
shared RPN head's weights count once and its multiply-adds once per level.
"""

from __future__ import annotations

import math

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model
from dlbench.models.resnet import EXPANSION
from dlbench.models.resnet import walk as resnet_walk

BUILDERS = {
    "pytorch": "dlbench.models.maskrcnn.torch:build",
    "tensorflow": "dlbench.models.maskrcnn.keras:build",
    "mindspore": "dlbench.models.maskrcnn.mindspore:build",
}
OBJECTIVE = "instance-segmentation"
LEVELS = (2, 3, 4, 5, 6)  # P2..P6 carry anchors; P2..P5 feed RoIAlign
ROI_LEVELS = (2, 3, 4, 5)
ASPECT_RATIOS = (0.5, 1.0, 2.0)  # height / width of an anchor
CANONICAL_LEVEL = 4  # FPN eq. 1: a canonical_size box reads P4
MASK_CONVS = 4


def stride(level: int) -> int:
    return 2**level


def level_sizes(cfg: dict) -> dict[int, int]:
    """Side of P2..P6 (square inputs): the ResNet's stage sides, P6 from P5 by 1x1/2."""
    side = cfg["image_size"]
    side = (side + 2 * 3 - 7) // 2 + 1  # stem conv, stride 2
    side = (side + 2 - 3) // 2 + 1  # max pool 3x3/2, pad 1
    sizes = {2: side}
    for level in (3, 4, 5):
        side = (side + 2 - 3) // 2 + 1  # the stage's 3x3 conv, stride 2
        sizes[level] = side
    sizes[6] = (sizes[5] - 1) // 2 + 1
    return sizes


def num_anchors(cfg: dict) -> int:
    return sum(s * s for s in level_sizes(cfg).values()) * len(ASPECT_RATIOS)


def output_layout(cfg: dict) -> list[tuple[str, tuple[int, ...]]]:
    """(part, per-sample shape) of the flattened output, in order."""
    a, c, m = len(ASPECT_RATIOS), cfg["num_classes"], cfg["mask_size"]
    parts = [(f"rpn.p{lv}", (s, s, a, 5)) for lv, s in level_sizes(cfg).items()]
    parts.append(("box", (cfg["rois"], c + 4 * c)))
    parts.append(("mask", (cfg["mask_rois"], c, m, m)))
    return parts


def output_width(cfg: dict) -> int:
    return sum(math.prod(shape) for _, shape in output_layout(cfg))


def output_shape(cfg: dict) -> tuple[int]:
    """Per-sample shape of ``logits`` (what the zoo tests hold every builder to)."""
    return (output_width(cfg),)


def split_output(cfg: dict, logits):
    """``{part: array (batch, *shape)}`` views of a (batch, L) output (numpy)."""
    out, at = {}, 0
    for name, shape in output_layout(cfg):
        n = math.prod(shape)
        out[name] = logits[:, at : at + n].reshape(logits.shape[0], *shape)
        at += n
    return out


def _backbone_cfg(cfg: dict) -> dict:
    return {"layers": cfg["layers"], "width": cfg["width"], "image_size": cfg["image_size"], "num_classes": 1}


def stage_channels(cfg: dict) -> tuple[int, ...]:
    """Channels of C2..C5."""
    return tuple(cfg["width"] * 2**s * EXPANSION for s in range(4))


def walk(cfg: dict):
    """models.walkcount ops, in network order.  The RPN head's convs run on five levels
    with one set of weights: ("shared", op) after the first; the heads' layers run once
    per box: ("roi", boxes, op); the mask head's transposed conv is ("deconv", cin, cout,
    k, stride, in_hw)."""
    body = list(resnet_walk(_backbone_cfg(cfg)))
    yield from body[:-2]  # the classifier's pool and fc go
    f, sizes, a = cfg["fpn_channels"], level_sizes(cfg), len(ASPECT_RATIOS)
    for level, cin in zip(ROI_LEVELS, stage_channels(cfg)):
        yield ("conv", cin, f, 1, 1, sizes[level])
        yield ("bias", f)
    for level in ROI_LEVELS:
        yield ("conv", f, f, 3, 1, sizes[level])
        yield ("bias", f)
    yield ("pool", "max", f, 1, 2, 0, sizes[5])
    for i, level in enumerate(LEVELS):
        for cout, k in ((f, 3), (a, 1), (4 * a, 1)):
            conv = ("conv", f, cout, k, 1, sizes[level])
            if i == 0:
                yield conv
                yield ("bias", cout)
            else:
                yield ("shared", conv)
    r, d, c, fc = cfg["rois"], cfg["mask_rois"], cfg["num_classes"], cfg["fc_width"]
    roi = cfg["box_roi_size"]
    for cin, cout in ((f * roi * roi, fc), (fc, fc), (fc, c), (fc, 4 * c)):
        yield ("roi", r, ("fc", cin, cout))
    side, mw = cfg["mask_roi_size"], cfg["mask_channels"]
    for i in range(MASK_CONVS):
        yield ("roi", d, ("conv", f if i == 0 else mw, mw, 3, 1, side))
        yield ("bias", mw)
    yield ("roi", d, ("deconv", mw, mw, 2, 2, side))
    yield ("bias", mw)
    yield ("roi", d, ("conv", mw, c, 1, 1, 2 * side))
    yield ("bias", c)


def parameter_count(spec: ModelSpec) -> int:
    return walkcount.parameters(walk(spec.config))


def multiply_adds(spec: ModelSpec) -> int:
    return walkcount.multiply_adds(walk(spec.config))


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder exports:
    the backbone's as ``models.resnet``'s under ``backbone.``, then the heads'."""
    shapes: dict[str, tuple[int, ...]] = {}

    def conv(name, cin, cout, k, bias=True):
        shapes[f"{name}.weight"] = (cout, cin, k, k)
        if bias:
            shapes[f"{name}.bias"] = (cout,)

    def bn(name, c):
        for p in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{name}.{p}"] = (c,)

    w = cfg["width"]
    conv("backbone.stem.conv", 3, w, 7, bias=False)
    bn("backbone.stem.bn", w)
    cin = w
    for stage, blocks in enumerate(cfg["layers"]):
        planes = w * 2**stage
        for b in range(blocks):
            p = f"backbone.layer{stage + 1}.{b}"
            for i, (ci, co, k) in enumerate(
                ((cin, planes, 1), (planes, planes, 3), (planes, planes * EXPANSION, 1)), 1
            ):
                conv(f"{p}.conv{i}", ci, co, k, bias=False)
                bn(f"{p}.bn{i}", co)
            if b == 0:
                conv(f"{p}.downsample.conv", cin, planes * EXPANSION, 1, bias=False)
                bn(f"{p}.downsample.bn", planes * EXPANSION)
            cin = planes * EXPANSION
    f = cfg["fpn_channels"]
    for level, c in zip(ROI_LEVELS, stage_channels(cfg)):
        conv(f"fpn.inner{level}", c, f, 1)
    for level in ROI_LEVELS:
        conv(f"fpn.layer{level}", f, f, 3)
    a = len(ASPECT_RATIOS)
    conv("rpn.conv", f, f, 3)
    conv("rpn.cls_logits", f, a, 1)
    conv("rpn.bbox_pred", f, 4 * a, 1)
    c, fc, roi = cfg["num_classes"], cfg["fc_width"], cfg["box_roi_size"]
    for name, cin_, cout in (
        ("box_head.fc6", f * roi * roi, fc),
        ("box_head.fc7", fc, fc),
        ("box_predictor.cls_score", fc, c),
        ("box_predictor.bbox_pred", fc, 4 * c),
    ):
        shapes[f"{name}.weight"] = (cout, cin_)
        shapes[f"{name}.bias"] = (cout,)
    mw = cfg["mask_channels"]
    for i in range(1, MASK_CONVS + 1):
        conv(f"mask_head.mask_fcn{i}", f if i == 1 else mw, mw, 3)
    shapes["mask_predictor.conv5_mask.weight"] = (mw, mw, 2, 2)  # (in, out, kH, kW)
    shapes["mask_predictor.conv5_mask.bias"] = (mw,)
    conv("mask_predictor.mask_fcn_logits", mw, c, 1)
    return shapes


def _maskrcnn(
    name: str,
    display: str,
    *,
    layers,
    divisor: int,
    image_size: int,
    num_classes: int,
    rois: int,
    mask_rois: int,
    batch: int,
    dataset: str,
    run: RunDefaults,
) -> ModelSpec:
    cfg = {
        "layers": tuple(layers),
        "width": 64 // divisor,
        "image_size": image_size,
        "num_classes": num_classes,
        "fpn_channels": 256 // divisor,
        "fc_width": 1024 // divisor,
        "mask_channels": 256 // divisor,
        "rois": rois,
        "mask_rois": mask_rois,
        "box_roi_size": 7,
        "mask_roi_size": 14,
        "mask_size": 28,
        "sampling_ratio": 2,
        # Anchor sides 32..512 px on P2..P6 at 800 px (8 x the level's stride), and
        # FPN eq. 1's canonical 224 px, both scaled with the image.
        "anchor_sizes": tuple(8 * stride(lv) * image_size / 800 for lv in LEVELS),
        "canonical_size": 224 * image_size / 800,
        # Detectron's box-delta weights of the box head; the RPN's are 1.
        "box_weights": (10.0, 10.0, 5.0, 5.0),
        # Detectron's SGD rate at 16 images a batch, 0.02, scaled to the zoo's batch 2.
        "learning_rate": 0.0025,
    }
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="maskrcnn",
            task="instance-segmentation",
            network_type="CNN",
            dataset=dataset,
            inputs=(
                InputSpec("image", (3, image_size, image_size)),
                InputSpec("rois", (rois, 4)),
                InputSpec("mask_rois", (mask_rois, 4)),
            ),
            num_classes=num_classes,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config=cfg,
            macs_fn=multiply_adds,
            params_fn=parameter_count,
            objective=OBJECTIVE,
            run=run,
        )
    )


# Static INT8 of the weighted layers only: with every type the quantizer handles, the
# RoIAlign gather on all four FPN levels through one range, the FPN sums and the packing
# Concat cost maskrcnn-mini (60 steps) its verdict (cosine 0.937); weighted layers only:
# cosine 0.988, verified.
INT8_OP_TYPES = ("Conv", "ConvTranspose", "MatMul", "Gemm")
# COCO: 80 classes and the background; 800 px square (Detectron resizes the short side
# to 800, the long to at most 1333); R = 1000 proposals, D = 100 detections.
MASKRCNN = _maskrcnn(
    "maskrcnn",
    "Mask R-CNN (ResNet-50-FPN, COCO)",
    layers=(3, 4, 6, 3),
    divisor=1,
    image_size=800,
    num_classes=81,
    rois=1000,
    mask_rois=100,
    batch=2,
    dataset="COCO 2017",
    run=RunDefaults(batch_sizes=(1, 2), train_steps=4, warmup_steps=1, int8_op_types=INT8_OP_TYPES),
)
MASKRCNN_R101 = _maskrcnn(
    "maskrcnn-r101",
    "Mask R-CNN (ResNet-101-FPN, COCO)",
    layers=(3, 4, 23, 3),
    divisor=1,
    image_size=800,
    num_classes=81,
    rois=1000,
    mask_rois=100,
    batch=2,
    dataset="COCO 2017",
    run=RunDefaults(batch_sizes=(1, 2), train_steps=4, warmup_steps=1, int8_op_types=INT8_OP_TYPES),
)
_maskrcnn(
    "maskrcnn-mini",
    "Mask R-CNN (ResNet-50-FPN, 1/8 width, 128px)",
    layers=(3, 4, 6, 3),
    divisor=8,
    image_size=128,
    num_classes=7,
    rois=32,
    mask_rois=8,
    batch=4,
    dataset="synthetic",
    run=RunDefaults(batch_sizes=(1, 4), eval=True, int8_op_types=INT8_OP_TYPES),
)
