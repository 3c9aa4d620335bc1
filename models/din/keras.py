"""DIN in Keras 3 (see ``models.din`` for the configuration and the choices).

A functional model: layers are named by their canonical (PyTorch) paths,
``item_embedding``, ``attention.0`` ... ``mlp.4``, which the weight-transfer
rules match.  The element-wise parts (features, mask, weighted sum) are
``keras.ops`` on the graph's tensors.  Initializers are PyTorch's, so the three
frameworks start from one distribution.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers, ops

from dlbench.models.din import PAD_ID, PRELU_INIT, embed_dim
from dlbench.models.registry import ModelSpec


class PReLU(layers.Layer):
    """``relu(x) - alpha * relu(-x)`` with one slope per unit of the last axis, on any
    rank (``keras.layers.PReLU`` sizes ``alpha`` by every non-batch axis)."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.alpha = self.add_weight(
            shape=(self.units,), name="alpha", initializer=keras.initializers.Constant(PRELU_INIT)
        )

    def call(self, x):
        return ops.relu(x) - ops.cast(self.alpha, x.dtype) * ops.relu(-x)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def _uniform(fan_in: int):
    bound = 1.0 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-bound, bound)


def _mlp(x, width: int, hidden: tuple[int, ...], out: int, prefix: str):
    index = 0
    for units in hidden:
        x = layers.Dense(
            units,
            name=f"{prefix}.{index}",
            kernel_initializer=_uniform(width),
            bias_initializer=_uniform(width),
        )(x)
        x = PReLU(units, name=f"{prefix}.{index + 1}")(x)
        index, width = index + 2, units
    return layers.Dense(
        out,
        name=f"{prefix}.{index}",
        dtype="float32",
        kernel_initializer=_uniform(width),
        bias_initializer=_uniform(width),
    )(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    d = embed_dim(cfg)
    hist_items, hist_cats, item, category = (
        keras.Input((i.shape[0],), dtype="int32", name=i.name) for i in spec.inputs
    )
    normal = keras.initializers.RandomNormal(0.0, 1.0)
    items = layers.Embedding(
        cfg["items"], cfg["item_dim"], name="item_embedding", embeddings_initializer=normal
    )
    cats = layers.Embedding(
        cfg["categories"], cfg["category_dim"], name="category_embedding", embeddings_initializer=normal
    )
    keys = ops.concatenate([items(hist_items), cats(hist_cats)], axis=-1)  # (B, T, D)
    query = ops.concatenate([items(item), cats(category)], axis=-1)  # (B, 1, D)
    q = query + ops.zeros_like(keys)  # (B, T, D)
    features = ops.concatenate([q, keys, q - keys, q * keys], axis=-1)
    scores = _mlp(features, 4 * d, cfg["attention_units"], 1, "attention")  # (B, T, 1)
    # Unnormalized weights (no softmax, as the paper); padding weighs nothing.
    mask = ops.cast(ops.not_equal(hist_items, PAD_ID), keys.dtype)
    weights = ops.squeeze(scores, -1) * mask
    interest = ops.sum(ops.expand_dims(weights, -1) * keys, axis=1)  # (B, D)
    x = ops.concatenate([interest, ops.squeeze(query, 1)], axis=-1)
    logits = _mlp(x, 2 * d, cfg["mlp_units"], cfg["num_classes"], "mlp")
    return keras.Model([hist_items, hist_cats, item, category], logits, name=spec.name.replace("-", "_"))
