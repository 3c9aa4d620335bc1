"""SSD300 in Keras 3 (functional API, channels-last), following ``models.ssd``, and
its multibox loss.

Padding is spelled out where Keras' ``'same'`` would differ from PyTorch's:
stride-2 convolutions get an explicit ``ZeroPadding2D(1)`` and a ``'valid'``
conv (``'same'`` pads an even input only at the bottom/right); ``pool3``'s
rounding up is ``'same'`` pooling, which pads bottom/right exactly as
``ceil_mode`` does; stride-1 convs (dilated conv6 included) and the 3x3/1
``pool5`` pad symmetrically under ``'same'``.  The heads' NHWC outputs reshape
straight to (row, column, box) order, PyTorch's after its permute.

Layer names are the canonical ones (``conv1_1`` ... ``conv11_2``,
``conv4_3_norm``, ``<source>_loc``/``<source>_conf``).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
from keras import layers, ops

from dlbench.models import ssd
from dlbench.models.registry import ModelSpec


@keras.saving.register_keras_serializable(package="dlbench")
class L2Norm(layers.Layer):
    """conv4_3's channel-wise L2 normalization times a learned per-channel scale."""

    def build(self, input_shape):
        self.gamma = self.add_weight(
            shape=(input_shape[-1],), name="gamma", initializer=keras.initializers.Constant(ssd.L2NORM_SCALE)
        )

    def call(self, x):
        norm = ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)) + ssd.L2NORM_EPS
        return x / norm * ops.cast(self.gamma, x.dtype)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    """The network for ``spec``; ``seed`` seeds Keras first.  Init as the other
    builders (kaiming normal fan-out convs, zero biases); the output in float32."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    size = cfg["image_size"]
    inputs = keras.Input((size, size, 3), name="input")
    init = keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")

    def conv(x, name, cout, k, stride=1, dilation=1, pad=1, relu=True):
        if stride > 1 and pad:
            x = layers.ZeroPadding2D(pad, name=f"{name}.pad")(x)
        same = stride == 1 and pad
        x = layers.Conv2D(
            cout,
            k,
            stride,
            padding="same" if same else "valid",
            dilation_rate=dilation,
            name=name,
            kernel_initializer=init,
            bias_initializer="zeros",
        )(x)
        return layers.ReLU(name=f"{name}.relu")(x) if relu else x

    x, found = inputs, {}
    for name, _, cout, k, stride, dil, pad, _ in ssd.backbone(cfg):
        x = conv(x, name, cout, k, stride, dil, pad)
        if name in ssd.SOURCES:
            found[name] = L2Norm(name="conv4_3_norm")(x) if name == "conv4_3" else x
        if name in ("conv1_2", "conv2_2", "conv3_3", "conv4_3"):
            x = layers.MaxPooling2D(2, padding="same" if name == "conv3_3" else "valid", name=f"{name}.pool")(
                x
            )
        elif name == "conv5_3":
            x = layers.MaxPooling2D(3, 1, padding="same", name="pool5")(x)
    loc, conf = [], []
    for src, _, _, boxes in ssd.sources(cfg):
        for kind, width, out in (("loc", 4, loc), ("conf", cfg["num_classes"], conf)):
            y = conv(found[src], f"{src}_{kind}", boxes * width, 3, relu=False)
            out.append(layers.Reshape((-1, width), name=f"{src}_{kind}.flat")(y))
    loc = layers.Concatenate(1, name="loc")(loc)
    conf = layers.Concatenate(1, name="conf")(conf)
    out = layers.Concatenate(-1, name="logits", dtype="float32")([loc, conf])
    return keras.Model(inputs, out, name=spec.name.replace("-", "_"))


def detection_loss(outputs, labels, neg_pos_ratio: int = 3):
    """Multibox loss (``models.ssd.boxes.multibox_loss``) in TensorFlow ops: hard
    negatives by ``tf.sort`` and the k-th largest background loss per image."""
    cls_t, loc_t = labels
    z = tf.cast(outputs, tf.float32)
    y = tf.cast(cls_t, tf.int32)
    pos = y > 0
    logp = tf.nn.log_softmax(z[..., 4:], -1)
    ce = -tf.gather(logp, y, axis=-1, batch_dims=2)
    d = tf.abs(z[..., :4] - tf.cast(loc_t, tf.float32))
    smooth = tf.reduce_sum(tf.where(d < 1.0, 0.5 * d * d, d - 0.5), -1)
    mining = tf.stop_gradient(tf.where(pos, tf.zeros_like(ce), -logp[..., 0]))
    n_pos = tf.reduce_sum(tf.cast(pos, tf.int32), 1, keepdims=True)
    k = tf.minimum(neg_pos_ratio * n_pos, tf.shape(y)[1] - n_pos)
    ranked = tf.sort(mining, axis=1, direction="DESCENDING")
    kth = tf.gather(ranked, tf.maximum(k - 1, 0), axis=1, batch_dims=1)
    neg = (mining >= kth) & (k > 0) & ~pos
    used = tf.cast(pos | neg, tf.float32)
    total = tf.reduce_sum(ce * used) + tf.reduce_sum(smooth * tf.cast(pos, tf.float32))
    return total / tf.maximum(tf.reduce_sum(tf.cast(pos, tf.float32)), 1.0)
