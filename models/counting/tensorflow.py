"""Parameter and multiply-add counts read off a built Keras model.

These walk the network that was actually built (its layers, their weights and
the output shapes the functional graph inferred), never the spec, so that a
test comparing them with ``models.resnet`` catches a builder that drifted from
the description.
"""

from __future__ import annotations

import math

import keras

from dlbench.models.counting import family_counter


def _layers(model: keras.Model):
    """Every leaf layer, descending into nested models."""
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            yield from _layers(layer)
        else:
            yield layer


def _recurrent_macs(layer) -> int:
    """An LSTM (or both directions of a Bidirectional one): per time step, the kernel
    and recurrent-kernel products, 4·units·(input + units); the time steps are read
    off the layer's input in the graph."""
    cells = (
        [layer.forward_layer, layer.backward_layer]
        if isinstance(layer, keras.layers.Bidirectional)
        else [layer]
    )
    steps = layer.input.shape[1]
    total = 0
    for lstm in cells:
        cin, gates = lstm.cell.kernel.shape
        units = lstm.cell.recurrent_kernel.shape[0]
        total += steps * (cin * gates + units * gates)
    return int(total)


def trainable_parameters(model: keras.Model) -> int:
    return sum(math.prod(w.shape) for w in model.trainable_weights)


def forward_macs(model: keras.Model, spec=None) -> int:
    """Conv, dense and LSTM multiply-adds of one sample's forward pass.

    ``spec`` is accepted for a uniform signature across frameworks; the shapes
    come from the model's own graph.  Conv MACs are counted from the layer's
    real output size and kernel (out_h * out_w * k_h * k_w * cin * cout /
    groups), as a hook-based counter would on the other frameworks.
    """
    family = family_counter(spec, "tensorflow")
    if family is not None:
        return int(family(model, spec))
    total = 0
    for layer in _layers(model):
        if isinstance(layer, (keras.layers.Bidirectional, keras.layers.LSTM)):
            total += _recurrent_macs(layer)
        elif isinstance(layer, keras.layers.Conv2D):
            shape = layer.output.shape
            out_h, out_w = shape[2:4] if layer.data_format == "channels_first" else shape[1:3]
            k_h, k_w, cin_per_group, cout = layer.kernel.shape
            total += out_h * out_w * k_h * k_w * cin_per_group * cout
        elif isinstance(layer, keras.layers.Dense):
            cin, cout = layer.kernel.shape
            # A Dense on a (batch, ..., features) input runs once per position.
            positions = math.prod(layer.output.shape[1:-1])
            total += positions * cin * cout
    return int(total)
