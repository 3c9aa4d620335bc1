"""BERT in Keras 3 (functional API), following ``models.bert.walk``.

Every dense layer, LayerNorm and residual add is a plain ``keras.layers`` layer
in the functional graph, named like the PyTorch module it corresponds to
(``encoder.layer.0.attention.self.query``, ``encoder.layer.0.output.LayerNorm``)
so that the weight-transfer rules can map layers by name and the counting
code can read each dense layer's real output shape.  Three small custom
layers cover what Keras has no layer for: the position embedding (its indices
are 0..seq-1, not an input), the attention product itself (split heads,
scaled scores + additive mask, softmax, dropout, context, merge heads) and the
MLM decoder, which multiplies by the word-embedding table instead of owning a
weight (the tied decoder of BERT).

GELU is the exact erf form, written out as ``0.5 x (1 + erf(x / sqrt 2))``
(``gelu_erf``), which is also how PyTorch computes it on CPU.  Keras' own
``gelu`` activation is exact too, but TensorFlow computes it with ``erfc``,
an operator tf2onnx cannot convert (the export fails with "uses operator
Erfc"); ``keras.ops.gelu`` defaults to the tanh approximation.  The network
takes fixed-length int32 inputs ``(batch, seq_len)``; ``seq_len`` can be
overridden at build time.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers, ops

from dlbench.models.bert import INIT_STD, LAYER_NORM_EPS, MASK_VALUE, check_head, config_with
from dlbench.models.registry import ModelSpec


@keras.saving.register_keras_serializable(package="dlbench")
def gelu_erf(x):
    """Exact GELU, x * Phi(x), through ``erf`` (exportable to ONNX's Erf)."""
    return 0.5 * x * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0))))


def _init():
    return keras.initializers.RandomNormal(stddev=INIT_STD)


def _dense(units: int, name: str, activation=None, dtype=None) -> layers.Dense:
    return layers.Dense(
        units,
        activation=activation,
        kernel_initializer=_init(),
        bias_initializer="zeros",
        name=name,
        dtype=dtype,
    )


def _layer_norm(name: str) -> layers.LayerNormalization:
    return layers.LayerNormalization(epsilon=LAYER_NORM_EPS, name=name)


class WordEmbedding(layers.Embedding):
    """An ``Embedding`` that can also project back: ``reverse=True`` is x @ table^T.

    Calling the same layer in both directions is how the MLM decoder shares the
    word-embedding weight: one variable, counted and trained once.
    """

    def call(self, inputs, reverse: bool = False):
        if reverse:
            table = ops.cast(self.embeddings, inputs.dtype)
            return ops.matmul(inputs, ops.transpose(table))
        return super().call(inputs)

    def compute_output_spec(self, inputs, reverse: bool = False):
        if reverse:
            return keras.KerasTensor(tuple(inputs.shape[:-1]) + (self.input_dim,), dtype=self.compute_dtype)
        return super().compute_output_spec(inputs)


class PositionEmbedding(layers.Embedding):
    """Rows 0..seq-1 of the position table, shaped (1, seq, hidden) for broadcasting."""

    def call(self, inputs):
        return ops.expand_dims(super().call(ops.arange(ops.shape(inputs)[1], dtype="int32")), 0)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((1, inputs.shape[1], self.output_dim), dtype=self.compute_dtype)


class AdditiveMask(layers.Layer):
    """int attention_mask (batch, seq) -> (batch, 1, 1, seq) float: 0 or -10000."""

    def call(self, mask):
        return ops.reshape(
            (1.0 - ops.cast(mask, self.compute_dtype)) * MASK_VALUE, (-1, 1, 1, ops.shape(mask)[1])
        )

    def compute_output_spec(self, mask):
        return keras.KerasTensor((mask.shape[0], 1, 1, mask.shape[1]), dtype=self.compute_dtype)


class ScaledDotProduct(layers.Layer):
    """Multi-head softmax(q k^T / sqrt(d) + mask) v on (batch, seq, hidden) q, k, v.

    ``macs(seq)`` is the multiply-adds of one sample's two products, read by the
    counting code together with the layer's real input shape.
    """

    def __init__(self, heads: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.heads = heads
        self.dropout = layers.Dropout(dropout)

    def _split(self, x):
        b, t, h = ops.shape(x)[0], ops.shape(x)[1], x.shape[-1]
        return ops.transpose(ops.reshape(x, (b, t, self.heads, h // self.heads)), (0, 2, 1, 3))

    def call(self, q, k, v, additive_mask, training=None):
        hidden = q.shape[-1]
        q, k, v = self._split(q), self._split(k), self._split(v)
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / math.sqrt(hidden // self.heads)
        probs = self.dropout(ops.softmax(scores + additive_mask, axis=-1), training=training)
        ctx = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
        return ops.reshape(ctx, (ops.shape(ctx)[0], ops.shape(ctx)[1], hidden))

    def compute_output_spec(self, q, k, v, additive_mask, training=None):
        return keras.KerasTensor(q.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "heads": self.heads, "dropout": self.dropout.rate}

    @staticmethod
    def macs(seq: int, hidden: int) -> int:
        return 2 * seq * seq * hidden


class Bias(layers.Layer):
    """Adds a learned vector (the MLM decoder's own bias)."""

    def build(self, input_shape):
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="bias")

    def call(self, x):
        return x + ops.cast(self.bias, x.dtype)


def _add_norm(x, residual, dropout: float, prefix: str):
    x = layers.Dropout(dropout, name=f"{prefix}.dropout")(x)
    x = layers.Add(name=f"{prefix}.add")([x, residual])
    return _layer_norm(f"{prefix}.LayerNorm")(x)


def _encoder_layer(x, additive, cfg: dict, prefix: str):
    hidden, p = cfg["hidden"], cfg["dropout"]
    q = _dense(hidden, f"{prefix}.attention.self.query")(x)
    k = _dense(hidden, f"{prefix}.attention.self.key")(x)
    v = _dense(hidden, f"{prefix}.attention.self.value")(x)
    ctx = ScaledDotProduct(cfg["heads"], p, name=f"{prefix}.attention.self.core")(q, k, v, additive)
    ctx = _dense(hidden, f"{prefix}.attention.output.dense")(ctx)
    x = _add_norm(ctx, x, p, f"{prefix}.attention.output")
    h = _dense(cfg["intermediate"], f"{prefix}.intermediate.dense", activation=gelu_erf)(x)
    h = _dense(hidden, f"{prefix}.output.dense")(h)
    return _add_norm(h, x, p, f"{prefix}.output")


def build(
    spec: ModelSpec, seed: int | None = None, head: str = "classification", **overrides: Any
) -> keras.Model:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds Keras (and numpy/python) first.  The heads' last layers
    compute in float32 (``dtype="float32"``) so that under a mixed-precision
    policy the logits, and the cross-entropy on them, stay in full precision.
    """
    check_head(head)
    cfg = config_with(spec, overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    seq, hidden, p = cfg["seq_len"], cfg["hidden"], cfg["dropout"]
    ids = keras.Input((seq,), dtype="int32", name="input_ids")
    types = keras.Input((seq,), dtype="int32", name="token_type_ids")
    mask = keras.Input((seq,), dtype="int32", name="attention_mask")

    word = WordEmbedding(
        cfg["vocab_size"], hidden, embeddings_initializer=_init(), name="embeddings.word_embeddings"
    )
    x = layers.Add(name="embeddings.add")(
        [
            word(ids),
            PositionEmbedding(
                cfg["max_position"],
                hidden,
                embeddings_initializer=_init(),
                name="embeddings.position_embeddings",
            )(ids),
            layers.Embedding(
                cfg["type_vocab_size"],
                hidden,
                embeddings_initializer=_init(),
                name="embeddings.token_type_embeddings",
            )(types),
        ]
    )
    x = _layer_norm("embeddings.LayerNorm")(x)
    x = layers.Dropout(p, name="embeddings.dropout")(x)
    additive = AdditiveMask(name="attention_mask.additive")(mask)
    for i in range(cfg["layers"]):
        x = _encoder_layer(x, additive, cfg, f"encoder.layer.{i}")
    first = x[:, 0, :]
    pooled = _dense(hidden, "pooler.dense", activation="tanh")(first)
    if head == "classification":
        pooled = layers.Dropout(p, name="dropout")(pooled)
        outputs = _dense(cfg["num_classes"], "classifier", dtype="float32")(pooled)
    else:
        h = _dense(hidden, "mlm.dense", activation=gelu_erf)(x)
        h = _layer_norm("mlm.LayerNorm")(h)
        mlm = Bias(name="mlm.decoder", dtype="float32")(word(h, reverse=True))
        nsp = _dense(2, "nsp", dtype="float32")(pooled)
        outputs = [mlm, nsp]
    return keras.Model([ids, types, mask], outputs, name=spec.name.replace("-", "_"))


def pretraining_loss(outputs, labels):
    """Masked-LM cross-entropy over positions whose label is not -100, plus NSP cross-entropy.

    ``outputs`` = (mlm_logits (B, T, V), nsp_logits (B, 2)); ``labels`` =
    (mlm_labels (B, T), nsp_labels (B,)).  Works in a ``tf.function``.
    """
    mlm_logits, nsp_logits = outputs
    mlm_labels, nsp_labels = labels
    mlm_labels = ops.cast(ops.reshape(mlm_labels, (-1,)), "int32")
    logits = ops.cast(ops.reshape(mlm_logits, (-1, ops.shape(mlm_logits)[-1])), "float32")
    keep = ops.cast(ops.not_equal(mlm_labels, -100), "float32")
    per_token = ops.sparse_categorical_crossentropy(ops.maximum(mlm_labels, 0), logits, from_logits=True)
    mlm = ops.sum(per_token * keep) / ops.sum(keep)
    nsp = ops.mean(
        ops.sparse_categorical_crossentropy(
            ops.cast(nsp_labels, "int32"), ops.cast(nsp_logits, "float32"), from_logits=True
        )
    )
    return mlm + nsp


def forward_macs(model: keras.Model, spec: ModelSpec | None = None) -> int:
    """Multiply-adds of one sample, read off the functional graph as built
    (``spec`` is accepted for the signature the other frameworks share).

    Dense layers count from their real output shape; each attention product
    and each reverse (decoder) call of the word embedding from the shapes of
    the tensors it was called on.  Nothing comes from the spec, so a builder
    that drifted from ``models.bert.walk`` shows.
    """
    total = 0
    for layer in model.layers:
        if isinstance(layer, layers.Dense):
            cin, cout = layer.kernel.shape
            total += math.prod(layer.output.shape[1:-1]) * cin * cout
        elif isinstance(layer, ScaledDotProduct):
            for node in layer._inbound_nodes:
                q, k = node.arguments.args[:2]
                total += q.shape[1] * k.shape[1] * q.shape[2] * 2
        elif isinstance(layer, WordEmbedding):
            for node in layer._inbound_nodes:
                if node.arguments.kwargs.get("reverse"):
                    x = node.arguments.args[0]
                    total += math.prod(x.shape[1:]) * layer.input_dim
    return int(total)
