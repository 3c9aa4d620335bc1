"""ResNet-50 v1.5 in Keras 3 (functional API), channels-last.

The input is NHWC ``(batch, H, W, 3)`` because TensorFlow's CPU convolution
kernels only run NHWC; NCHW convolutions fail on CPU.  Every padded layer is
``ZeroPadding2D(k // 2)`` followed by a ``'valid'`` layer: Keras' ``'same'``
pads asymmetrically for strided layers (more on the bottom/right), which would
shift every strided feature map by a pixel against PyTorch and MindSpore and
make transferred weights compute a different function.

Layer names follow ``models.resnet.walk`` order with PyTorch-style dotted
names (``layer1.0.conv1``, ``layer1.0.downsample.bn``, ``fc``) so a weight
transfer tool can map layers across frameworks by name.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers

from dlbench.models.registry import ModelSpec
from dlbench.models.resnet import EXPANSION

BN_EPSILON = 1e-5
# Keras' moving average keeps `momentum` of the old value; PyTorch's momentum
# 0.1 is the weight of the new batch, so the equivalent here is 0.9.
BN_MOMENTUM = 0.9


def conv_init():
    # torchvision's ResNet init (kaiming_normal_, fan_out, relu), so a freshly
    # built network starts from the same distribution in every framework.
    return keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")


def conv_bn(
    x,
    filters: int,
    kernel: int,
    stride: int,
    conv_name: str,
    bn_name: str,
    relu: bool,
    zero_gamma: bool = False,
):
    if kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2, name=f"{conv_name}.pad")(x)
    x = layers.Conv2D(
        filters,
        kernel,
        strides=stride,
        padding="valid",
        use_bias=False,
        kernel_initializer=conv_init(),
        name=conv_name,
    )(x)
    x = layers.BatchNormalization(
        momentum=BN_MOMENTUM,
        epsilon=BN_EPSILON,
        name=bn_name,
        gamma_initializer="zeros" if zero_gamma else "ones",
    )(x)
    if relu:
        x = layers.ReLU(name=f"{bn_name}.relu")(x)
    return x


def bottleneck(x, planes: int, stride: int, downsample: bool, prefix: str, zero_init_residual: bool):
    shortcut = x
    y = conv_bn(x, planes, 1, 1, f"{prefix}.conv1", f"{prefix}.bn1", relu=True)
    y = conv_bn(y, planes, 3, stride, f"{prefix}.conv2", f"{prefix}.bn2", relu=True)
    y = conv_bn(
        y,
        planes * EXPANSION,
        1,
        1,
        f"{prefix}.conv3",
        f"{prefix}.bn3",
        relu=False,
        zero_gamma=zero_init_residual,
    )
    if downsample:
        shortcut = conv_bn(
            x,
            planes * EXPANSION,
            1,
            stride,
            f"{prefix}.downsample.conv",
            f"{prefix}.downsample.bn",
            relu=False,
        )
    y = layers.Add(name=f"{prefix}.add")([y, shortcut])
    return layers.ReLU(name=f"{prefix}.relu")(y)


def build(
    spec: ModelSpec, seed: int | None = None, zero_init_residual: bool = True, **overrides: Any
) -> keras.Model:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds Keras (and numpy/python) first, so that a builder called on
    its own gets reproducible weights.  ``zero_init_residual`` zeroes the gamma
    of each block's last BN, as the PyTorch and MindSpore builders do: every
    block starts as the identity, which keeps a short from-scratch run at lr
    0.05 from diverging; it changes the initial weights only, not the function.

    The classifier always computes in float32 (``dtype="float32"``) so that
    under a mixed-precision policy the logits, and therefore the softmax
    cross-entropy, stay in full precision; under float32 this changes nothing.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    width, size = cfg["width"], cfg["image_size"]
    inputs = keras.Input((size, size, 3), name="input")
    x = conv_bn(inputs, width, 7, 2, "stem.conv", "stem.bn", relu=True)
    # Zero padding is equivalent to PyTorch's -inf padding here: the input is a
    # ReLU output (>= 0) and every 3x3 window contains at least one real pixel,
    # so a padded zero can never exceed the window's true maximum.
    x = layers.ZeroPadding2D(1, name="stem.pool.pad")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="valid", name="stem.pool")(x)
    for stage, blocks in enumerate(cfg["layers"]):
        planes = width * 2**stage
        for b in range(blocks):
            stride = 2 if (stage > 0 and b == 0) else 1
            x = bottleneck(
                x,
                planes,
                stride,
                downsample=(b == 0),
                prefix=f"layer{stage + 1}.{b}",
                zero_init_residual=zero_init_residual,
            )
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    # PyTorch's nn.Linear default init, so the starting loss matches the
    # other frameworks' (Keras' glorot_uniform gives ~4x the logit variance).
    bound = 1 / math.sqrt(x.shape[-1])
    outputs = layers.Dense(
        cfg["num_classes"],
        dtype="float32",
        name="fc",
        kernel_initializer=keras.initializers.RandomUniform(-bound, bound),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )(x)
    return keras.Model(inputs, outputs, name=spec.name.replace("-", "_"))
