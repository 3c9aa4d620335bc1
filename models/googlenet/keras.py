"""GoogLeNet (CIFAR-10 variant) in Keras 3 (functional API), channels-last.

The input is NHWC ``(batch, H, W, 3)``: TensorFlow's CPU convolutions only run
NHWC.  Every conv and the branch pools are stride 1, where Keras' ``'same'``
pads symmetrically (k//2 on each side) exactly like PyTorch and MindSpore; the
two stride-2 pools are ``ZeroPadding2D(1)`` + ``'valid'`` because a strided
``'same'`` pads only bottom/right and would shift every later feature map by a
pixel against the other frameworks.  Zero padding equals PyTorch's -inf
padding there because the pooled values are ReLU outputs (>= 0).

Layer names are the PyTorch module paths (``inception3a.branch2.1.conv``),
which ``models.weights`` uses to map layers across frameworks.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers

from dlbench.models.googlenet import blocks
from dlbench.models.registry import ModelSpec

BN_EPSILON = 1e-5
# Keras' moving average keeps `momentum` of the old value: PyTorch's 0.1.
BN_MOMENTUM = 0.9


def _basic_conv(x, filters: int, kernel: int, name: str):
    # torchvision's conv init (kaiming normal, fan_out, relu), as in the other builders.
    x = layers.Conv2D(
        filters,
        kernel,
        padding="same",
        use_bias=False,
        name=f"{name}.conv",
        kernel_initializer=keras.initializers.VarianceScaling(
            2.0, mode="fan_out", distribution="untruncated_normal"
        ),
    )(x)
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=f"{name}.bn")(x)
    return layers.ReLU(name=f"{name}.relu")(x)


def _inception(x, widths, name: str):
    n1, r3, n3, r5, n5, pool = widths
    b1 = _basic_conv(x, n1, 1, f"{name}.branch1")
    b2 = _basic_conv(x, r3, 1, f"{name}.branch2.0")
    b2 = _basic_conv(b2, n3, 3, f"{name}.branch2.1")
    b3 = _basic_conv(x, r5, 1, f"{name}.branch3.0")
    b3 = _basic_conv(b3, n5, 3, f"{name}.branch3.1")
    b3 = _basic_conv(b3, n5, 3, f"{name}.branch3.2")
    b4 = layers.MaxPooling2D(3, strides=1, padding="same", name=f"{name}.branch4.0")(x)
    b4 = _basic_conv(b4, pool, 1, f"{name}.branch4.1")
    return layers.Concatenate(axis=-1, name=f"{name}.concat")([b1, b2, b3, b4])


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
    x = inputs
    for block in blocks(cfg):
        if block[0] == "stem":
            x = _basic_conv(x, block[1], 3, "stem")
        elif block[0] == "pool":
            x = layers.ZeroPadding2D(1, name=f"{block[1]}.pad")(x)
            x = layers.MaxPooling2D(3, strides=2, padding="valid", name=block[1])(x)
        else:
            x = _inception(x, block[3], block[1])
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    # PyTorch's nn.Linear default init, so the starting loss matches the other frameworks'.
    bound = 1 / math.sqrt(x.shape[-1])
    outputs = layers.Dense(
        cfg["num_classes"],
        dtype="float32",
        name="fc",
        kernel_initializer=keras.initializers.RandomUniform(-bound, bound),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )(x)
    return keras.Model(inputs, outputs, name=spec.name.replace("-", "_"))
