"""The synthetic network in Keras: the same units, counts and order, in Keras's own layers.

Where the PyTorch version replays the ONNX graph op by op, a Keras network is written
the way a Keras user writes one: channels-last (TensorFlow's CPU convolutions take no
other layout) and built-in layers only, so the .keras file loads anywhere without code
of ours.  It is the same network in structure (the units, their counts, the order
``emit.sequence`` gives, each instance with its own weights, a bridge where ONNX's has
one, always through the flat tensor: ONNX's within-rank tiles and slices are of the
channels-first layout), not in numbers: channels-last flattening orders the values
differently, so it is checked by its shapes and parameter count, not against ONNX
Runtime.  What Keras cannot say is said the nearest way it can, and listed in the
file's description: an element-wise op with a per-element constant becomes a scalar
scale or offset (``Rescaling``), a reduction over the last axis a pooling over it, and
shape arithmetic (tiny units) is left out, its dispatch cost being the only thing it
has.

Run as ``python -m dlbench.harness.synth.keras_net NETWORK.onnx OUT.keras [...]``: the lanes
come from the network's own metadata, and the parent never imports TensorFlow.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from dlbench.harness.synth.emit import LANES_KEY
from dlbench.harness.synth.units import Unit

KERAS_ACTIVATIONS = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSigmoid": "hard_sigmoid",
    "HardSwish": "hard_swish", "LeakyRelu": "leaky_relu", "Elu": "elu", "Softplus": "softplus",
}  # fmt: skip


def _channels_last(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (*shape[2:], shape[1]) if len(shape) >= 3 else shape


def build(lanes: list[tuple[Unit, int]], seed: int = 0) -> Any:
    """The Keras model: input [batch, F], output [batch, 1], as ``emit.network``."""
    import keras
    from keras import layers

    from dlbench.harness.synth.emit import emitted_shape, sequence

    keras.utils.set_random_seed(seed)
    batched = {j: (u, n) for j, (u, n) in enumerate(lanes) if u.batched and n > 0}
    order = sequence(batched, {j: emitted_shape(u) for j, (u, _) in batched.items()})
    x = inputs = keras.Input((math.prod(lanes[order[0]][0].x),), name="input")
    for j in order:
        u = lanes[j][0]
        if tuple(x.shape[1:]) != _sample_shape(u):
            x = _bridge(x, math.prod(x.shape[1:]), u, layers)
        x = _apply(u, x, layers)
    x = layers.Reshape((math.prod(x.shape[1:]), 1))(x)
    outputs = layers.GlobalAveragePooling1D(name="output")(x)
    return keras.Model(inputs, outputs, name="synthetic")


SPATIAL = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool"}


def _sample_shape(u: Unit) -> tuple[int, ...]:
    """A unit's input as Keras holds it per sample: channels last for the spatial ops
    (a per-sample multiple folded into the height), else the dimensions besides the
    batch axis, the multiple first where it is not 1."""
    axis = u.axis or 0
    q = u.x[axis]
    rest = [d for i, d in enumerate(u.x) if i != axis]
    if u.op in SPATIAL or (u.op == "BatchNormalization" and len(rest) >= 3):
        channels, height, *others = rest
        return (height * q, *others, channels)
    return tuple(rest) if q == 1 else (q, *rest)


def _bridge(x, have: int, u: Unit, layers) -> Any:
    """Flat, cropped or repeated to the unit's size, then its shape: ONNX's flat bridge."""
    need = math.prod(u.x)
    x = layers.Reshape((have, 1))(x)
    if have < need:
        x = layers.Concatenate(axis=1)([x] * -(-need // have))
        have *= -(-need // have)
    if have != need:
        x = layers.Cropping1D((0, have - need))(x)
    return layers.Reshape(_sample_shape(u))(x)


def _apply(u: Unit, x, layers) -> Any:
    a = u.attrs
    if u.op == "Conv":
        k, cout, group = tuple(a["kernel_shape"]), u.y[1], a.get("group", 1)
        strides = tuple(a.get("strides", [1] * len(k)))
        padding = "same" if any(a.get("pads", [0])) else "valid"
        act = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}.get(a.get("activation", ""), None)
        if group > 1 and group == u.x[1] and cout == u.x[1]:
            return layers.DepthwiseConv2D(k, strides, padding=padding, activation=act)(x)
        return layers.Conv2D(cout, k, strides, padding=padding, groups=group, activation=act)(x)
    if u.op == "MatMul":
        return layers.Dense(u.y[-1], use_bias=False)(x)
    if u.op in ("LSTM", "GRU"):
        cell = (layers.LSTM if u.op == "LSTM" else layers.GRU)(a["hidden_size"], return_sequences=True)
        return layers.Bidirectional(cell)(x) if u.dirs == 2 else cell(x)
    if u.op == "BatchNormalization":
        return layers.BatchNormalization()(x)
    if u.op == "LayerNormalization":
        return layers.LayerNormalization()(x)
    if u.op == "SkipLayerNormalization":
        return layers.LayerNormalization()(layers.Add()([x, x]))
    if u.op == "Softmax":
        return layers.Softmax()(x)
    if u.op in ("MaxPool", "AveragePool"):
        pool = layers.MaxPooling2D if u.op == "MaxPool" else layers.AveragePooling2D
        padding = "same" if any(a.get("pads", [0])) else "valid"
        return pool(tuple(a["kernel_shape"]), tuple(a.get("strides", a["kernel_shape"])), padding=padding)(x)
    if u.op == "GlobalAveragePool":
        return layers.GlobalAveragePooling2D(keepdims=True)(x)
    if u.op == "ReduceMean":  # over the last axis, whatever the rank: rows of it pooled
        rows = layers.Reshape((-1, x.shape[-1]))(x)
        return layers.Reshape((-1, 1))(layers.GlobalAveragePooling1D(data_format="channels_first")(rows))
    if u.op == "Add":
        return layers.Rescaling(1.0, offset=0.05)(x)
    if u.op == "Mul":
        return layers.Rescaling(-1.0)(x)
    if u.op == "Transpose" and len(x.shape) >= 3:
        dims = list(range(1, len(x.shape)))
        return layers.Permute((*dims[:-2], dims[-1], dims[-2]))(x)
    if u.op in ("Transpose", "Reshape"):
        return layers.Reshape((-1,))(x)
    if u.op == "Gelu":
        return layers.Activation("gelu")(x)
    if u.op in KERAS_ACTIVATIONS:
        return layers.Activation(KERAS_ACTIVATIONS[u.op])(x)
    if u.op == "Erf":
        return layers.Activation("tanh")(x)  # the nearest bounded built-in
    raise ValueError(f"{u.op}: no Keras layer for it")


def lanes_of(onnx_path: str) -> list[tuple[Unit, int]]:
    import onnx

    props = {p.key: p.value for p in onnx.load(onnx_path, load_external_data=False).metadata_props}
    if LANES_KEY not in props:
        raise ValueError(f"{onnx_path}: not a dlbench synth network (no {LANES_KEY} metadata)")
    return [(Unit.from_json(u), int(n)) for u, n in json.loads(props[LANES_KEY])]


def convert(onnx_path: str, out: str) -> dict[str, Any]:
    """The Keras version at ``out``, run once at two batch sizes to check its shapes."""
    import numpy as np

    model = build(lanes_of(onnx_path))
    width = model.inputs[0].shape[1]
    for batch in (1, 3):
        y = model(np.random.default_rng(0).standard_normal((batch, width)).astype("float32"))
        if tuple(y.shape) != (batch, 1) or not np.isfinite(np.asarray(y)).all():
            raise ValueError(f"the Keras version gives {tuple(y.shape)} at batch {batch}")
    model.save(out)
    return {"path": out, "parameters": int(model.count_params())}


if __name__ == "__main__":
    from dlbench.harness.synth.frameworks import main

    # Keras serializes a functional model's layers recursively: a zoo-sized network of
    # thousands of layers in a chain passes Python's default depth of 1,000.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 50_000))
    sys.exit(main(convert, sys.argv[1:]))
