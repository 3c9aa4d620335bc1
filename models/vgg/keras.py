"""VGG16 in Keras 3 (functional API), channels-last, following ``models.vgg``.

The 3x3 convolutions have stride 1, where Keras' ``'same'`` pads symmetrically
like PyTorch's padding 1, and the 2x2/2 pools need none.  Before the flatten
the map is permuted to channels-first, so ``fc6`` reads its inputs in
PyTorch's (C, H, W) order and its kernel moves with the plain dense rule.

Layer names are the canonical ones (``conv1_1`` ... ``fc8``).
"""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

from dlbench.models.registry import ModelSpec
from dlbench.models.vgg import POOL, convs, dense


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds Keras (and numpy/python) first.  The initializers are
    ``models.vgg``'s (kaiming normal fan-out convs, N(0, 1/fan_in) dense weights,
    zero biases).  The classifier computes in float32 so that under a mixed-precision
    policy the logits stay full precision.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    size = cfg["image_size"]
    inputs = keras.Input((size, size, 3), name="input")
    x = inputs
    conv_init = keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")
    for name, _, cout, _, closes in convs(cfg):
        x = layers.Conv2D(
            cout, 3, padding="same", name=name, kernel_initializer=conv_init, bias_initializer="zeros"
        )(x)
        x = layers.ReLU(name=f"{name}.relu")(x)
        if closes:
            x = layers.MaxPooling2D(POOL, name=f"{name}.pool")(x)
    x = layers.Permute((3, 1, 2), name="to_nchw")(x)
    x = layers.Flatten(name="flatten")(x)
    fcs = list(dense(cfg))
    for name, _, cout in fcs:
        last = name == fcs[-1][0]
        x = layers.Dense(
            cout,
            name=name,
            dtype="float32" if last else None,
            kernel_initializer=keras.initializers.VarianceScaling(
                1.0, mode="fan_in", distribution="untruncated_normal"
            ),
            bias_initializer="zeros",
        )(x)
        if not last:
            x = layers.ReLU(name=f"{name}.relu")(x)
            x = layers.Dropout(cfg["dropout"], name=f"{name}.dropout")(x)
    return keras.Model(inputs, x, name=spec.name.replace("-", "_"))
