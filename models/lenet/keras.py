"""LeNet-5 in Keras 3 (functional API), channels-last, following ``models.lenet.walk``.

Convs are ``'valid'`` and pools 2x2/2 without padding, which every framework
computes identically in NHWC or NCHW.  Before the flatten the feature map is
permuted to channels-first, so the first dense layer sees its 400 inputs in
PyTorch's (C, H, W) order: trained weights move to and from the other
frameworks with the plain dense rule, and the exported ONNX graph computes the
same function as PyTorch's (one Transpose more).

Layer names are the PyTorch module names (``conv1`` ... ``fc3``).
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers

from dlbench.models.lenet import POOL, walk
from dlbench.models.registry import ModelSpec


def _torch_default(fan_in: int) -> dict:
    """PyTorch's default Conv2d/Linear init: weights and biases uniform in +-1/sqrt(fan_in)."""
    bound = 1 / math.sqrt(fan_in)
    return {
        "kernel_initializer": keras.initializers.RandomUniform(-bound, bound),
        "bias_initializer": keras.initializers.RandomUniform(-bound, bound),
    }


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds Keras (and numpy/python) first.  The classifier computes in
    float32 so that under a mixed-precision policy the logits stay full precision.
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    size = cfg["image_size"]
    inputs = keras.Input((size, size, cfg["channels"]), name="input")
    x = inputs
    ops = list(walk(cfg))
    for op in ops:
        if op[0] == "conv":
            _, name, cin, cout, k, _ = op
            x = layers.Conv2D(cout, k, padding="valid", name=name, **_torch_default(cin * k * k))(x)
            x = layers.ReLU(name=f"{name}.relu")(x)
            x = layers.MaxPooling2D(POOL, name=f"{name}.pool")(x)
    x = layers.Permute((3, 1, 2), name="to_nchw")(x)
    x = layers.Flatten(name="flatten")(x)
    fcs = [op for op in ops if op[0] == "fc"]
    for _, name, cin, cout in fcs:
        last = name == fcs[-1][1]
        x = layers.Dense(cout, name=name, dtype="float32" if last else None, **_torch_default(cin))(x)
        if not last:
            x = layers.ReLU(name=f"{name}.relu")(x)
    return keras.Model(inputs, x, name=spec.name.replace("-", "_"))
