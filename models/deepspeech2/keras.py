"""DeepSpeech2 in Keras 3 (see ``models.deepspeech2`` for the configuration and choices).

The input is NHWC, (bins, frames, 1), as every zoo CNN in Keras (the ONNX
export transposes from NCHW).  PyTorch's symmetric conv padding is an explicit
``ZeroPadding2D`` before a ``valid`` convolution.  Before the LSTMs, a frame's
features are ordered channel-major (``Permute`` to (frames, channels, bins)
then ``Reshape``), PyTorch's ``reshape(n, c*f, t)`` order, so that the first
LSTM's kernel rows mean the same thing in every framework.  Each depth is a
``Bidirectional(LSTM, merge_mode="sum")`` named ``rnn.{layer}``: the weight
rules fold PyTorch's two biases into Keras' one.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import tensorflow as tf
from keras import layers

from dlbench.models.deepspeech2 import BLANK, BN_EPS, CONVS, HARDTANH_MAX, conv_sizes
from dlbench.models.registry import ModelSpec

# Keras' moving average keeps `momentum` of the old value: PyTorch's 0.1.
BN_MOMENTUM = 0.9


def _uniform(bound: float):
    return keras.initializers.RandomUniform(-bound, bound)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> keras.Model:
    cfg = spec.config_with(overrides)
    if seed is not None:
        keras.utils.set_random_seed(seed)
    c, hidden = cfg["channels"], cfg["hidden_size"]
    x = inputs = keras.Input((cfg["bins"], cfg["frames"], 1), name=spec.inputs[0].name)
    cin = 1
    for i, (kernel, stride, pad) in enumerate(CONVS, start=1):
        x = layers.ZeroPadding2D(((pad[0], pad[0]), (pad[1], pad[1])), name=f"conv{i}.pad")(x)
        bound = 1 / math.sqrt(cin * kernel[0] * kernel[1])
        x = layers.Conv2D(
            c,
            kernel,
            strides=stride,
            padding="valid",
            use_bias=False,
            kernel_initializer=_uniform(bound),
            name=f"conv{i}",
        )(x)
        x = layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPS, name=f"bn{i}")(x)
        x = layers.ReLU(max_value=HARDTANH_MAX, name=f"clip{i}")(x)  # hardtanh(0, 20)
        cin = c
    f, t = conv_sizes(cfg)[-1]
    x = layers.Permute((2, 3, 1), name="to_frames")(x)  # (frames, c, bins)
    x = layers.Reshape((t, c * f), name="flatten")(x)
    bound = 1 / math.sqrt(hidden)
    for layer in range(cfg["num_layers"]):
        lstm = layers.LSTM(
            hidden,
            return_sequences=True,
            unit_forget_bias=False,
            kernel_initializer=_uniform(bound),
            recurrent_initializer=_uniform(bound),
            bias_initializer=_uniform(bound),
            name=f"rnn.{layer}.cell",
        )
        x = layers.Bidirectional(lstm, merge_mode="sum", name=f"rnn.{layer}")(x)
    logits = layers.Dense(
        cfg["num_classes"],
        dtype="float32",
        name="fc",
        kernel_initializer=_uniform(bound),
        bias_initializer=_uniform(bound),
    )(x)
    return keras.Model(inputs, logits, name=spec.name.replace("-", "_"))


def ctc_loss(logits, labels):
    """Mean over utterances of -log p(transcript) (see ``models.deepspeech2.torch``)."""
    transcripts, lengths, frames = labels
    per_utterance = tf.nn.ctc_loss(
        labels=tf.cast(transcripts, tf.int32),
        logits=tf.cast(logits, tf.float32),
        label_length=tf.cast(lengths, tf.int32),
        logit_length=tf.cast(frames, tf.int32),
        logits_time_major=False,
        blank_index=BLANK,
    )
    return tf.reduce_mean(per_utterance)
