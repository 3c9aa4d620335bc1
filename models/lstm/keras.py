"""The LSTM sentiment classifier in Keras 3 (see ``models.lstm`` for the choices).

Layers are named ``embedding``, ``lstm.{depth}`` (a ``Bidirectional`` wrapper,
or a plain ``LSTM`` when not bidirectional) and ``fc``: PyTorch's module
paths, which the weight-transfer rules match.  Keras' LSTM has one bias per gate set,
which equals PyTorch's ``b_ih + b_hh``.  Initializers are PyTorch's, so the
three frameworks start from the same distribution (Keras' defaults, glorot,
orthogonal and a unit forget bias, would train differently).
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers

from dlbench.models.registry import ModelSpec


def _uniform(bound: float):
    return keras.initializers.RandomUniform(-bound, bound)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    hidden = cfg["hidden_size"]
    ids = keras.Input((cfg["seq_len"],), dtype="int32", name=spec.inputs[0].name)
    x = layers.Embedding(
        cfg["vocab_size"],
        cfg["embedding_dim"],
        name="embedding",
        embeddings_initializer=keras.initializers.RandomNormal(0.0, 1.0),
    )(ids)
    bound = 1 / math.sqrt(hidden)
    for layer in range(cfg["num_layers"]):
        top = layer == cfg["num_layers"] - 1
        lstm = layers.LSTM(
            hidden,
            return_sequences=not top,
            unit_forget_bias=False,
            kernel_initializer=_uniform(bound),
            recurrent_initializer=_uniform(bound),
            bias_initializer=_uniform(bound),
            name=f"lstm.{layer}" + (".cell" if cfg["bidirectional"] else ""),
        )
        if cfg["bidirectional"]:
            lstm = layers.Bidirectional(lstm, merge_mode="concat", name=f"lstm.{layer}")
        x = lstm(x)
    fc_bound = 1 / math.sqrt(x.shape[-1])
    logits = layers.Dense(
        cfg["num_classes"],
        dtype="float32",
        name="fc",
        kernel_initializer=_uniform(fc_bound),
        bias_initializer=_uniform(fc_bound),
    )(x)
    return keras.Model(ids, logits, name=spec.name.replace("-", "_"))
