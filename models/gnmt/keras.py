"""GNMT in Keras 3 (see ``models.gnmt`` for the network and its choices).

A functional model whose layers are named as PyTorch's module paths (the canonical
weight names): ``embedding``, ``encoder.0`` (a ``Bidirectional`` LSTM),
``encoder.{1,2,3}``, ``decoder.{k}``, ``attention.query`` / ``.key`` / ``.score``,
``classifier``.  Keras' LSTM has one bias per gate set, PyTorch's ``b_ih + b_hh``.
The greedy decoder calls the same layers once per step (the loop unrolled in the
graph), carrying each decoder LSTM's (h, c) state from step to step.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import layers, ops

from dlbench.models.gnmt import BOS_ID, INIT_RANGE, MASK_VALUE, PAD_ID, check_decoder
from dlbench.models.registry import ModelSpec


def _uniform():
    return keras.initializers.RandomUniform(-INIT_RANGE, INIT_RANGE)


def _lstm(hidden: int, name: str, state: bool = False):
    return layers.LSTM(
        hidden,
        return_sequences=True,
        return_state=state,
        unit_forget_bias=False,
        kernel_initializer=_uniform(),
        recurrent_initializer=_uniform(),
        bias_initializer=_uniform(),
        name=name,
    )


def _dense(units: int, name: str, bias: bool = True):
    return layers.Dense(
        units, use_bias=bias, kernel_initializer=_uniform(), bias_initializer=_uniform(), name=name
    )


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    cfg = spec.config_with(overrides)
    decoder = check_decoder(cfg["decoder"])
    if seed is not None:
        keras.utils.set_random_seed(seed)
    vocab, hidden, depth = cfg["vocab_size"], cfg["hidden"], cfg["layers"]
    embedding = layers.Embedding(vocab, hidden, embeddings_initializer=_uniform(), name="embedding")
    encoder = [layers.Bidirectional(_lstm(hidden, "encoder.0.cell"), name="encoder.0")]
    encoder += [_lstm(hidden, f"encoder.{k}") for k in range(1, depth)]
    dec = [_lstm(hidden, f"decoder.{k}", state=True) for k in range(depth)]
    query, key = _dense(hidden, "attention.query"), _dense(hidden, "attention.key", bias=False)
    score, classifier = _dense(1, "attention.score", bias=False), _dense(vocab, "classifier")

    src = keras.Input((cfg["src_len"],), dtype="int32", name="src")
    x = embedding(src)
    for k, lstm in enumerate(encoder):
        y = lstm(x)
        x = y + x if k >= 2 else y
    values, keys = x, key(x)
    mask_add = ops.expand_dims(ops.cast(ops.equal(src, PAD_ID), "float32") * MASK_VALUE, 1)

    def attention(q):
        energy = ops.tanh(ops.expand_dims(query(q), 2) + ops.expand_dims(keys, 1))
        scores = ops.squeeze(score(energy), 3) + mask_add
        return ops.matmul(ops.softmax(scores, axis=2), values)

    def step(tokens, states):
        out = dec[0](embedding(tokens), initial_state=states[0])
        x, new = out[0], [out[1:]]
        context = attention(x)
        for k in range(1, depth):
            out = dec[k](ops.concatenate([x, context], axis=2), initial_state=states[k])
            x = out[0] + x if k >= 2 else out[0]
            new.append(out[1:])
        return classifier(x), new

    states = [None] * depth
    if decoder == "teacher":
        tgt_in = keras.Input((cfg["tgt_len"],), dtype="int32", name="tgt_in")
        logits, _ = step(tgt_in, states)
        return keras.Model([src, tgt_in], logits, name=spec.name.replace("-", "_"))
    token = ops.cast(ops.zeros_like(src[:, :1]) + BOS_ID, "int32")
    steps = []
    for _ in range(cfg["decode_len"]):
        logits, states = step(token, states)
        steps.append(logits)
        # top_k, not argmax: Keras' TensorFlow argmax bitcasts (for -0.0), which no ONNX
        # opset has; the first of equal maxima wins either way, as in torch.argmax.
        token = ops.cast(ops.top_k(logits, 1)[1][:, :, 0], "int32")
    return keras.Model(src, ops.concatenate(steps, axis=1), name=spec.name.replace("-", "_"))


def seq2seq_loss(logits, labels):
    """Mean cross-entropy over the target positions that are not padding."""
    import tensorflow as tf

    labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
    logits = tf.cast(tf.reshape(logits, [-1, tf.shape(logits)[-1]]), tf.float32)
    keep = tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_sum(nll * keep) / tf.maximum(tf.reduce_sum(keep), 1.0)


def forward_macs(model: keras.Model, spec: ModelSpec | None = None) -> int:
    """Multiply-adds of one sample, read off the built graph: every call of every
    LSTM and dense layer (a greedy model calls each once per step) at the shapes the
    graph inferred, and each ``matmul`` (the attention's context product)."""
    total = 0
    for op in model.operations:
        for node in op._inbound_nodes:
            inp, out = node.input_tensors, node.output_tensors
            if isinstance(op, keras.layers.Bidirectional):
                cells = [op.forward_layer, op.backward_layer]
            elif isinstance(op, keras.layers.LSTM):
                cells = [op]
            else:
                cells = []
            for lstm in cells:
                cin, gates = lstm.cell.kernel.shape
                total += inp[0].shape[1] * (cin + lstm.cell.units) * gates
            if isinstance(op, keras.layers.Dense):
                cin, cout = op.kernel.shape
                total += math.prod(out[0].shape[1:-1]) * cin * cout
            elif type(op).__name__ == "Matmul":
                a, b = inp
                total += math.prod(a.shape[1:]) * b.shape[-1]
    return int(total)
