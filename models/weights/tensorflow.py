"""Canonical weights from and into a Keras 3 model (TensorFlow backend).

Keras stores a conv kernel as (kH, kW, in, out) and a dense kernel as (in,
out); batch norm calls its arrays gamma/beta/moving_mean/moving_variance.
"""

from __future__ import annotations

from collections import OrderedDict

import keras
import numpy as np

from dlbench.models.bert.keras import Bias as BertBias
from dlbench.models.din.keras import PReLU as DinPReLU
from dlbench.models.ssd.keras import L2Norm as SsdL2Norm
from dlbench.models.weights import WeightMismatch
from dlbench.models.weights.rules import Param, Rule, export_layers, import_layers, ruled_layers, simple
from dlbench.models.weights.rules import transpose as _t

HWIO_TO_OIHW = (3, 2, 0, 1)
OIHW_TO_HWIO = (2, 3, 1, 0)


_CONV2D = simple(
    ("weight", "kernel", _t(*HWIO_TO_OIHW), _t(*OIHW_TO_HWIO)), Param("bias", "bias", optional=True)
)
# Conv1D kernel (k, in, out) <-> PyTorch (out, in, k).
_CONV1D = simple(("weight", "kernel", _t(2, 1, 0), _t(2, 1, 0)), Param("bias", "bias", optional=True))
# Conv2DTranspose kernel (kH, kW, out, in) <-> PyTorch's ConvTranspose2d (in, out, kH, kW).
_CONV2D_TRANSPOSE = simple(
    ("weight", "kernel", _t(3, 2, 0, 1), _t(2, 3, 1, 0)), Param("bias", "bias", optional=True)
)
_DENSE = simple(("weight", "kernel", _t(1, 0), _t(1, 0)), Param("bias", "bias", optional=True))
# DepthwiseConv2D kernel (kH, kW, channels, 1) <-> PyTorch's grouped conv (channels, 1, kH, kW).
_DEPTHWISE = simple(
    ("weight", "kernel", _t(2, 3, 0, 1), _t(2, 3, 0, 1)), Param("bias", "bias", optional=True)
)
_BN = simple(
    Param("weight", "gamma", optional=True),
    Param("bias", "beta", optional=True),
    ("running_mean", "moving_mean"),
    ("running_var", "moving_variance"),
)


def _lstm_cells(layer) -> list[tuple[object, bool]]:
    """(LSTM layer, is the backward direction) of an LSTM or a Bidirectional LSTM."""
    if isinstance(layer, keras.layers.Bidirectional):
        parts = [(layer.forward_layer, False), (layer.backward_layer, True)]
    else:
        parts = [(layer, False)]
    for lstm, _ in parts:
        if not isinstance(lstm, keras.layers.LSTM):
            raise WeightMismatch(
                f"layer {layer.name!r}: no weight rule for a {type(lstm).__name__} inside Bidirectional"
            )
    return parts


def _lstm_export(layer) -> dict[str, np.ndarray]:
    from dlbench.models.weights.recurrent import keras_to_canonical

    out: dict[str, np.ndarray] = {}
    for lstm, reverse in _lstm_cells(layer):
        cell = lstm.cell
        out.update(
            keras_to_canonical(
                _read(cell, "kernel"),
                _read(cell, "recurrent_kernel"),
                _read(cell, "bias") if cell.use_bias else None,
                reverse=reverse,
            )
        )
    return out


def _lstm_load(layer, mine: dict[str, np.ndarray]) -> None:
    from dlbench.models.weights.recurrent import canonical_to_keras, suffixes

    cells = _lstm_cells(layer)
    known = {k for _, reverse in cells for k in suffixes(0, reverse)}
    surplus = [k for k in mine if k not in known]
    if surplus:
        raise WeightMismatch(f"layer {layer.name!r}: unexpected LSTM arrays {surplus[:3]}")
    values = []
    for lstm, reverse in cells:
        cell = lstm.cell
        part = {k: v for k, v in mine.items() if k in suffixes(0, reverse)}
        values.append(
            (cell, canonical_to_keras(part, cell.kernel.shape[0], cell.units, cell.use_bias, reverse=reverse))
        )
    for cell, (kernel, recurrent, bias) in values:  # all checked before any write
        _write(cell, "kernel", kernel)
        _write(cell, "recurrent_kernel", recurrent)
        if bias is not None:
            _write(cell, "bias", bias)


# Layer class -> Rule.  Add a layer type here and in the PyTorch and MindSpore tables.
RULES: dict[type, Rule] = {
    keras.layers.Conv1D: _CONV1D,
    keras.layers.DepthwiseConv2D: _DEPTHWISE,
    keras.layers.Conv2D: _CONV2D,
    keras.layers.Conv2DTranspose: _CONV2D_TRANSPOSE,
    keras.layers.Dense: _DENSE,
    keras.layers.BatchNormalization: _BN,
    keras.layers.Embedding: simple(("weight", "embeddings")),
    keras.layers.LSTM: Rule(export=_lstm_export, load=_lstm_load),
    keras.layers.Bidirectional: Rule(export=_lstm_export, load=_lstm_load),
    keras.layers.LayerNormalization: simple(("weight", "gamma"), ("bias", "beta")),
    # DIN's PReLU on the last axis: its slopes, one per unit (PyTorch's nn.PReLU weight).
    DinPReLU: simple(("weight", "alpha")),
    # BERT's masked-LM decoder bias (its weight is the word embeddings').
    BertBias: simple(("bias", "bias")),
    # SSD's conv4_3 L2 normalization: one learned scale per channel.
    SsdL2Norm: simple(("weight", "gamma")),
}


def _get(layer, attr: str):
    for part in attr.split("."):
        layer = getattr(layer, part, None)
        if layer is None:
            return None
    return layer


def _read(layer, attr: str) -> np.ndarray | None:
    v = _get(layer, attr)
    return None if v is None else np.array(keras.ops.convert_to_numpy(v), dtype=np.float32)


def _write(layer, attr: str, value: np.ndarray) -> None:
    v = _get(layer, attr)
    v.assign(value.astype(v.dtype))


def _sublayers(layer) -> list:
    # Keras 3 has no public "direct sub-layers" for a plain Layer (Model.layers
    # exists only on models); _flatten_layers is what Model.layers itself uses.
    return list(layer._flatten_layers(include_self=False, recursive=False))


def _named(layer, prefix: str = ""):
    """(name, layer) of every layer below ``layer``, prefixing containers' names."""
    for sub in _sublayers(layer):
        name = sub.name if not prefix or sub.name.startswith(prefix) else prefix + sub.name
        yield name, sub
        if _sublayers(sub):
            yield from _named(sub, name + ".")


def _own_weights(layer) -> int:
    inner = {id(w) for sub in _sublayers(layer) for w in sub.weights}
    return sum(1 for w in layer.weights if id(w) not in inner)


def layers(model):
    return ruled_layers(_named(model), RULES, _own_weights, "tensorflow")


def export_weights(model) -> OrderedDict[str, np.ndarray]:
    return export_layers(layers(model), _read)


def import_weights(model, weights: dict[str, np.ndarray]):
    import_layers(layers(model), weights, _read, _write, "tensorflow")
    return model
