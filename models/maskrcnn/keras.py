"""Mask R-CNN in Keras 3 (functional API, channels-last), following ``models.maskrcnn``,
and its training loss.

The image input is NHWC ``(batch, S, S, 3)`` like every zoo CNN in Keras (TensorFlow's
CPU convolutions run NHWC only; ``models.native.tensorflow.nhwc`` and the ONNX export
transpose the spec's NCHW); ``rois`` and ``mask_rois`` are as the spec says.  Inside,
everything stays NHWC and the heads are rearranged once, at the end, into
``output_layout``'s PyTorch order: an NHWC RPN map already reads (row, column, anchor),
the box features are permuted to (channel, row, column) before ``box_head.fc6``, and
the mask logits to (class, row, column).

RoIAlign (``RoIAlign``) is ``reference.roi_align`` in plain TensorFlow ops with static
shapes and no loop over boxes: the four levels of each image are flattened and
concatenated (and the batch with them), every sample's four bilinear corners get an
index into that one table (image offset + level offset + row x width + column, the
level chosen per box by FPN's eq. 1) and ONE ``tf.gather`` reads them all, so the
graph exports to ONNX as a single Gather.  (tf2onnx cannot push every NHWC
Transpose into a convolution here, as it does for the classifiers: the gather table
and the heads' permutes need the channels-last maps, so the mini's file keeps 28.)  The mask head
runs on the boxes as a batch
(``BoxesToBatch``): its layers run D times per sample, which ``forward_macs`` counts.

Layer names are the canonical ones: the backbone is ``models.resnet.keras``'s blocks
under ``backbone.``, the heads are named as in ``canonical_shapes``; the RPN head's
three layers are called on P2..P6 (one set of weights).

Initialization, after torchvision's Mask R-CNN: the backbone as the zoo's ResNet
(kaiming normal fan-out) but every BN at gamma 1, as torchvision's detection backbones
(zero-gamma residuals shield a block's first two BNs, whose gamma then moves by
less
than float32 resolves at 1.0 in a short run at Detectron's small rate); FPN convs kaiming uniform
(a = 1) with zero bias;
RPN convs normal std 0.01, zero bias; ``box_head.fc6``/``fc7`` PyTorch's nn.Linear
default (uniform +-1/sqrt(fan_in), weight and bias); ``box_predictor.cls_score`` normal
std 0.01 and ``bbox_pred`` std 0.001, zero bias (Detectron's); the mask head and
predictor kaiming normal fan-out with zero bias.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from dlbench.models import maskrcnn as M
from dlbench.models.maskrcnn.reference import SMOOTH_L1_BETA
from dlbench.models.registry import ModelSpec
from dlbench.models.resnet.keras import bottleneck, conv_bn, conv_init


@keras.saving.register_keras_serializable(package="dlbench")
class RoIAlign(layers.Layer):
    """``[P2, P3, P4, P5, boxes (B, N, 4)]`` -> ``(B, N, size, size, C)``: see the module
    docstring.  Box coordinates never go through the mixed-precision cast (no autocast):
    in bfloat16 a 128 px coordinate would lose its fraction."""

    def __init__(self, size: int, ratio: int, canonical_size: float, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.size, self.ratio, self.canonical_size = size, ratio, canonical_size

    def get_config(self):
        return {
            **super().get_config(),
            "size": self.size,
            "ratio": self.ratio,
            "canonical_size": self.canonical_size,
        }

    def compute_output_shape(self, shapes):
        return (shapes[-1][0], shapes[-1][1], self.size, self.size, shapes[0][-1])

    def call(self, inputs):
        *maps, boxes = inputs
        dtype = maps[0].dtype
        channels, n = maps[0].shape[-1], boxes.shape[1]
        heights = [m.shape[1] for m in maps]
        widths = [m.shape[2] for m in maps]
        sizes = [h * w for h, w in zip(heights, widths)]
        total = sum(sizes)
        batch = tf.shape(boxes)[0]
        table = tf.reshape(
            tf.concat([tf.reshape(m, (batch, -1, channels)) for m in maps], 1), (-1, channels)
        )  # (B*T, C)
        boxes = tf.cast(boxes, tf.float32)
        x0, y0, x1, y1 = tf.unstack(boxes, axis=-1)  # (B, N)
        # FPN eq. 1, as reference.roi_levels: 0..3 for P2..P5.
        scale = tf.sqrt(tf.maximum((x1 - x0) * (y1 - y0), 0.0))
        k = tf.floor(M.CANONICAL_LEVEL + tf.math.log(scale / self.canonical_size + 1e-6) / math.log(2.0))
        lv = tf.cast(tf.clip_by_value(k, M.ROI_LEVELS[0], M.ROI_LEVELS[-1]), tf.int32) - 2
        inv = tf.gather(tf.constant([1.0 / M.stride(v) for v in M.ROI_LEVELS]), lv)
        hmap = tf.gather(tf.constant(heights, tf.float32), lv)
        wmap = tf.gather(tf.constant(widths, tf.float32), lv)
        offset = tf.gather(tf.constant(np.cumsum([0] + sizes[:-1]), tf.int32), lv)
        base = offset + tf.range(batch)[:, None] * total  # (B, N)
        steps = tf.constant((np.arange(self.size * self.ratio) + 0.5) / self.ratio, tf.float32)  # (S*r,)

        def axis(lo, hi, side):
            """Samples along one axis: (inside, low index, high index, low weight,
            high weight), each (B, N, S*r)."""
            lo, hi = lo * inv - 0.5, hi * inv - 0.5
            v = lo[..., None] + steps * ((hi - lo) / self.size)[..., None]
            side = side[..., None]
            inside = tf.cast((v >= -1.0) & (v <= side), tf.float32)
            v = tf.clip_by_value(v, 0.0, side - 1.0)
            first = tf.floor(v)
            second = tf.minimum(first + 1.0, side - 1.0)
            frac = v - first
            return inside, tf.cast(first, tf.int32), tf.cast(second, tf.int32), 1.0 - frac, frac

        iny, ya, yb, hy, ly = axis(y0, y1, hmap)
        inx, xa, xb, hx, lx = axis(x0, x1, wmap)
        row = lambda t: t[..., :, None]  # noqa: E731 - a one-line helper used right here
        col = lambda t: t[..., None, :]  # noqa: E731 - a one-line helper used right here
        width = tf.cast(wmap, tf.int32)[..., None, None]
        start = base[..., None, None]
        index = tf.stack(
            [start + row(y) * width + col(x) for y in (ya, yb) for x in (xa, xb)]
        )  # (4, B, N, Sr, Sr)
        inside = row(iny) * col(inx)
        weight = tf.stack([row(wy) * col(wx) * inside for wy in (hy, ly) for wx in (hx, lx)])
        values = tf.gather(table, index)  # (4, B, N, Sr, Sr, C)
        values = tf.reduce_sum(values * tf.cast(weight, dtype)[..., None], 0)
        s, r = self.size, self.ratio
        values = tf.reshape(values, (batch, n, s, r, s, r, channels))
        return tf.reduce_mean(values, (3, 5))


@keras.saving.register_keras_serializable(package="dlbench")
class BoxesToBatch(layers.Layer):
    """(B, N, ...) -> (B*N, ...): the mask head's convolutions take one box a row."""

    def call(self, x):
        return tf.reshape(x, (-1, *x.shape[2:]))

    def compute_output_shape(self, shape):
        return (None, *shape[2:])


@keras.saving.register_keras_serializable(package="dlbench")
class BatchToBoxes(layers.Layer):
    """(B*N, ...) -> (B, N, ...), back from ``BoxesToBatch``."""

    def __init__(self, boxes: int, **kwargs):
        super().__init__(**kwargs)
        self.boxes = boxes

    def get_config(self):
        return {**super().get_config(), "boxes": self.boxes}

    def call(self, x):
        return tf.reshape(x, (-1, self.boxes, *x.shape[1:]))

    def compute_output_shape(self, shape):
        return (None, self.boxes, *shape[1:])


def _normal(std):
    return keras.initializers.RandomNormal(0.0, std)


def _linear_default(fan_in):
    bound = 1 / math.sqrt(fan_in)
    return {
        "kernel_initializer": keras.initializers.RandomUniform(-bound, bound),
        "bias_initializer": keras.initializers.RandomUniform(-bound, bound),
    }


def _backbone(image, cfg):
    """C2..C5 of ``models.resnet.keras``'s ResNet, its layers under ``backbone.``."""
    width = cfg["width"]
    x = conv_bn(image, width, 7, 2, "backbone.stem.conv", "backbone.stem.bn", relu=True)
    x = layers.ZeroPadding2D(1, name="backbone.stem.pool.pad")(x)  # input >= 0: as -inf
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="backbone.stem.pool")(x)
    stages = []
    for stage, blocks in enumerate(cfg["layers"]):
        for b in range(blocks):
            x = bottleneck(
                x,
                width * 2**stage,
                2 if stage > 0 and b == 0 else 1,
                downsample=b == 0,
                prefix=f"backbone.layer{stage + 1}.{b}",
                zero_init_residual=False,
            )
        stages.append(x)
    return stages


def _fpn(stages, cfg):
    """P2..P6 (``models.maskrcnn``): laterals, nearest 2x top-down sums, 3x3 outputs."""
    f = cfg["fpn_channels"]
    fpn_init = {
        "kernel_initializer": keras.initializers.VarianceScaling(1.0, "fan_in", "uniform"),
        "bias_initializer": "zeros",
    }
    inner = {
        lv: layers.Conv2D(f, 1, name=f"fpn.inner{lv}", **fpn_init)(c) for lv, c in zip(M.ROI_LEVELS, stages)
    }
    top = inner[5]
    merged = {5: top}
    for lv in (4, 3, 2):
        up = layers.UpSampling2D(2, interpolation="nearest", name=f"fpn.up{lv}")(top)
        side, have = inner[lv].shape[1], up.shape[1]
        if have != side:  # an odd side: nearest resizing to it reads rows 0..side-1
            up = layers.Cropping2D(((0, have - side), (0, have - side)), name=f"fpn.up{lv}.crop")(up)
        top = layers.Add(name=f"fpn.add{lv}")([inner[lv], up])
        merged[lv] = top
    out = {
        lv: layers.Conv2D(f, 3, padding="same", name=f"fpn.layer{lv}", **fpn_init)(merged[lv])
        for lv in M.ROI_LEVELS
    }
    out[6] = layers.MaxPooling2D(1, strides=2, name="fpn.pool6")(out[5])  # ceil: 25 -> 13
    return out


def _rpn(levels, cfg):
    """The shared RPN head on P2..P6, each level flattened (row, column, anchor, 5)."""
    f, a = cfg["fpn_channels"], len(M.ASPECT_RATIOS)
    init = {"kernel_initializer": _normal(0.01), "bias_initializer": "zeros"}
    conv = layers.Conv2D(f, 3, padding="same", activation="relu", name="rpn.conv", **init)
    cls = layers.Conv2D(a, 1, name="rpn.cls_logits", **init)
    box = layers.Conv2D(4 * a, 1, name="rpn.bbox_pred", **init)
    out = []
    for lv in M.LEVELS:
        t = conv(levels[lv])
        side = t.shape[1]
        z = layers.Reshape((side, side, a, 1), name=f"rpn.p{lv}.cls")(cls(t))
        d = layers.Reshape((side, side, a, 4), name=f"rpn.p{lv}.box")(box(t))
        both = layers.Concatenate(-1, name=f"rpn.p{lv}.cat")([z, d])
        out.append(layers.Flatten(name=f"rpn.p{lv}.flat")(both))
    return out


def _box_head(levels, rois, cfg):
    """RoIAlign 7x7, (channel, row, column) flattening, fc6/fc7 and the predictors:
    (B, R * 5C), each box's class logits then its deltas."""
    s, c, fc = cfg["box_roi_size"], cfg["num_classes"], cfg["fc_width"]
    x = RoIAlign(s, cfg["sampling_ratio"], cfg["canonical_size"], name="box_roi_align")(
        [levels[lv] for lv in M.ROI_LEVELS] + [rois]
    )
    x = layers.Permute((1, 4, 2, 3), name="box_head.chw")(x)
    x = layers.Reshape((cfg["rois"], -1), name="box_head.flatten")(x)
    x = layers.Dense(fc, activation="relu", name="box_head.fc6", **_linear_default(x.shape[-1]))(x)
    x = layers.Dense(fc, activation="relu", name="box_head.fc7", **_linear_default(fc))(x)
    z = layers.Dense(
        c, name="box_predictor.cls_score", kernel_initializer=_normal(0.01), bias_initializer="zeros"
    )(x)
    d = layers.Dense(
        4 * c, name="box_predictor.bbox_pred", kernel_initializer=_normal(0.001), bias_initializer="zeros"
    )(x)
    both = layers.Concatenate(-1, name="box_predictor.cat")([z, d])
    return layers.Flatten(name="box_predictor.flat")(both)


def _mask_head(levels, mask_rois, cfg):
    """RoIAlign 14x14, four 3x3 convs, the 2x2/2 transposed conv and the 1x1 class
    logits, per box: (B, D * C * 28 * 28) in (box, class, row, column) order."""
    s, mw = cfg["mask_roi_size"], cfg["mask_channels"]
    init = {"kernel_initializer": conv_init(), "bias_initializer": "zeros"}
    x = RoIAlign(s, cfg["sampling_ratio"], cfg["canonical_size"], name="mask_roi_align")(
        [levels[lv] for lv in M.ROI_LEVELS] + [mask_rois]
    )
    x = BoxesToBatch(name="mask_head.boxes")(x)
    for i in range(1, M.MASK_CONVS + 1):
        x = layers.Conv2D(mw, 3, padding="same", activation="relu", name=f"mask_head.mask_fcn{i}", **init)(x)
    x = layers.Conv2DTranspose(mw, 2, strides=2, activation="relu", name="mask_predictor.conv5_mask", **init)(
        x
    )
    x = layers.Conv2D(cfg["num_classes"], 1, name="mask_predictor.mask_fcn_logits", **init)(x)
    x = BatchToBoxes(cfg["mask_rois"], name="mask_predictor.boxes")(x)
    x = layers.Permute((1, 4, 2, 3), name="mask_predictor.chw")(x)
    return layers.Flatten(name="mask_predictor.flat")(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    """The network for ``spec`` on ``[image (NHWC), rois, mask_rois]``; ``seed`` seeds
    Keras first.  The output is float32 under any dtype policy."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    size = cfg["image_size"]
    image = keras.Input((size, size, 3), name="image")
    rois = keras.Input((cfg["rois"], 4), name="rois")
    mask_rois = keras.Input((cfg["mask_rois"], 4), name="mask_rois")
    levels = _fpn(_backbone(image, cfg), cfg)
    parts = _rpn(levels, cfg) + [_box_head(levels, rois, cfg), _mask_head(levels, mask_rois, cfg)]
    out = layers.Concatenate(1, name="logits", dtype="float32")(parts)
    return keras.Model([image, rois, mask_rois], out, name=spec.name.replace("-", "_"))


def forward_macs(model: keras.Model, spec: ModelSpec | None = None) -> int:
    """Multiply-adds of one sample, read off the built graph: every call of every conv,
    transposed conv and dense layer (the RPN head's on five levels) at the shapes the
    graph inferred.  The mask head's layers see the boxes as their batch, so they count
    once per mask box, D read off the ``mask_rois`` input."""
    boxes = model.inputs[2].shape[1]
    total = 0
    for op in model.operations:
        if not isinstance(op, (layers.Conv2D, layers.Conv2DTranspose, layers.Dense)):
            continue
        times = boxes if op.name.startswith(("mask_head.", "mask_predictor.")) else 1
        for node in op._inbound_nodes:
            inp, out = node.input_tensors[0].shape, node.output_tensors[0].shape
            if isinstance(op, layers.Conv2DTranspose):  # (kH, kW, out, in), per input pixel
                kh, kw, cout, cin = op.kernel.shape
                total += times * inp[1] * inp[2] * kh * kw * cin * cout
            elif isinstance(op, layers.Conv2D):
                kh, kw, cin, cout = op.kernel.shape
                total += times * out[1] * out[2] * kh * kw * cin * cout
            elif isinstance(op, layers.Dense):
                cin, cout = op.kernel.shape
                total += times * math.prod(out[1:-1]) * cin * cout
    return int(total)


def loss_terms(outputs, labels) -> dict[str, tf.Tensor]:
    """``reference.loss_terms`` in TensorFlow ops.  Without the spec, the logits are
    split by the labels' shapes: A, R, D, M from them and C = (L - 5A) / (5R + D M M)."""
    rpn_lab, rpn_tgt, roi_lab, roi_tgt, mask_cls, mask_tgt = (tf.cast(t, tf.float32) for t in labels)
    z = tf.cast(outputs, tf.float32)
    a, r, d, m = rpn_lab.shape[1], roi_lab.shape[1], mask_cls.shape[1], mask_tgt.shape[-1]
    c = (z.shape[1] - 5 * a) // (5 * r + d * m * m)
    rpn = tf.reshape(z[:, : 5 * a], (-1, a, 5))
    box = tf.reshape(z[:, 5 * a : 5 * a + 5 * r * c], (-1, r, 5 * c))
    masks = tf.reshape(z[:, 5 * a + 5 * r * c :], (-1, d, c, m, m))

    def count(flags):
        return tf.maximum(tf.reduce_sum(flags), 1.0)

    sampled = tf.cast(rpn_lab >= 0, tf.float32)
    n_rpn = count(sampled)
    bce = tf.nn.sigmoid_cross_entropy_with_logits(tf.maximum(rpn_lab, 0.0), rpn[..., 0])
    positive = tf.cast(rpn_lab == 1, tf.float32)
    valid = tf.cast(roi_lab >= 0, tf.float32)
    n_roi = count(valid)
    lab = tf.cast(tf.maximum(roi_lab, 0.0), tf.int32)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(lab, box[..., :c])
    deltas = tf.reshape(box[..., c:], (-1, r, c, 4))
    picked = tf.gather(deltas, lab, axis=2, batch_dims=2)  # (B, R, 4)
    mcls = tf.cast(mask_cls, tf.int32)
    mz = tf.gather(masks, mcls, axis=2, batch_dims=2)  # (B, D, M, M)
    mvalid = tf.cast(mcls > 0, tf.float32)
    mask_bce = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(mask_tgt, mz), (-1, -2))
    return {
        "rpn_objectness": tf.reduce_sum(bce * sampled) / n_rpn,
        "rpn_box": tf.reduce_sum(tf.reduce_sum(_smooth_l1(rpn[..., 1:] - rpn_tgt), -1) * positive) / n_rpn,
        "box_class": tf.reduce_sum(ce * valid) / n_roi,
        "box_delta": tf.reduce_sum(
            tf.reduce_sum(_smooth_l1(picked - roi_tgt), -1) * tf.cast(roi_lab > 0, tf.float32)
        )
        / n_roi,
        "mask": tf.reduce_sum(mask_bce * mvalid) / tf.maximum(tf.reduce_sum(mvalid) * m * m, 1.0),
    }


def _smooth_l1(x, beta=SMOOTH_L1_BETA):
    ax = tf.abs(x)
    return tf.where(ax < beta, 0.5 * ax * ax / beta, ax - 0.5 * beta)


def instance_segmentation_loss(outputs, labels):
    """The training loss (``reference.loss``): the sum of the five terms, float32."""
    return tf.add_n(list(loss_terms(outputs, labels).values()))
