"""DenseNet-121 in Keras 3 (functional API), channels-last.

The input is NHWC ``(batch, H, W, 3)``: TensorFlow's CPU convolutions only run
NHWC, so the concatenations are on the last axis (channel order is still the
input's channels first, then the new ones, as in PyTorch).  Every padded layer
is ``ZeroPadding2D`` + ``'valid'``: Keras' ``'same'`` pads a strided layer on
the bottom/right only, which would shift the stem's feature maps by a pixel
against PyTorch and MindSpore (see models/resnet/keras.py); the stride-1 3x3
convs use the same form so every padded layer reads alike.  The transitions'
2x2/2 average pools need no padding.

Layer names are the PyTorch module paths (``block1.layer1.conv2``), which
``models.weights`` uses to map layers across frameworks.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers

from dlbench.models.densenet import BN_SIZE, blocks
from dlbench.models.registry import ModelSpec

BN_EPSILON = 1e-5
# Keras' moving average keeps `momentum` of the old value: PyTorch's 0.1.
BN_MOMENTUM = 0.9


def _conv(x, filters: int, kernel: int, stride: int, name: str):
    # torchvision's DenseNet conv init: kaiming normal with fan_in (PyTorch's default mode).
    if kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2, name=f"{name}.pad")(x)
    return layers.Conv2D(
        filters,
        kernel,
        strides=stride,
        padding="valid",
        use_bias=False,
        name=name,
        kernel_initializer=keras.initializers.VarianceScaling(
            2.0, mode="fan_in", distribution="untruncated_normal"
        ),
    )(x)


def _bn_relu(x, name: str):
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=name)(x)
    return layers.ReLU(name=f"{name}.relu")(x)


def _dense_layer(x, growth_rate: int, prefix: str):
    y = _bn_relu(x, f"{prefix}.bn1")
    y = _conv(y, BN_SIZE * growth_rate, 1, 1, f"{prefix}.conv1")
    y = _bn_relu(y, f"{prefix}.bn2")
    y = _conv(y, growth_rate, 3, 1, f"{prefix}.conv2")
    return layers.Concatenate(axis=-1, name=f"{prefix}.concat")([x, y])


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds Keras (and numpy/python) first.  The classifier always
    computes in float32 so that under a mixed-precision policy the logits and
    the loss stay in full precision; under float32 this changes nothing.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    size = cfg["image_size"]
    inputs = keras.Input((size, size, 3), name="input")
    x = _conv(inputs, cfg["init_features"], 7, 2, "stem.conv")
    x = _bn_relu(x, "stem.bn")
    # Zero padding equals PyTorch's -inf padding here: the pool's input is a ReLU
    # output (>= 0) and every 3x3 window holds at least one real pixel.
    x = layers.ZeroPadding2D(1, name="stem.pool.pad")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="stem.pool")(x)
    for entry in blocks(cfg):
        if entry[0] == "block":
            _, i, _, n = entry
            for j in range(1, n + 1):
                x = _dense_layer(x, cfg["growth_rate"], f"block{i}.layer{j}")
        else:
            _, i, _, cout = entry
            x = _bn_relu(x, f"transition{i}.bn")
            x = _conv(x, cout, 1, 1, f"transition{i}.conv")
            x = layers.AveragePooling2D(2, strides=2, padding="valid", name=f"transition{i}.pool")(x)
    x = _bn_relu(x, "final_bn")
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    # torchvision's classifier init: nn.Linear's default weight, zero bias.
    bound = 1 / math.sqrt(x.shape[-1])
    outputs = layers.Dense(
        cfg["num_classes"],
        dtype="float32",
        name="fc",
        kernel_initializer=keras.initializers.RandomUniform(-bound, bound),
        bias_initializer="zeros",
    )(x)
    return keras.Model(inputs, outputs, name=spec.name.replace("-", "_"))
