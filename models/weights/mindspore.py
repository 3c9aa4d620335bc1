"""Canonical weights from and into a MindSpore ``nn.Cell``.

MindSpore's Conv2d (out, in/groups, kH, kW), Conv2dTranspose (in, out/groups,
kH, kW) and Dense (out, in) already have PyTorch's layouts; batch norm calls
its arrays gamma/beta/moving_mean/moving_variance.  Layers are found by Cell
path (``cells_and_names``), not by parameter name, so a network wrapped in a
training cell still matches.
"""

from __future__ import annotations

import os

os.environ.setdefault("GLOG_v", "3")

from collections import OrderedDict

import mindspore as ms
import numpy as np
from mindspore import nn

from dlbench.models.bert.mindspore import TiedDecoder as BertTiedDecoder
from dlbench.models.ssd.mindspore import L2Norm as SsdL2Norm
from dlbench.models.weights.rules import Param, Rule, export_layers, import_layers, ruled_layers, simple

_WEIGHT_BIAS = simple(("weight", "weight"), Param("bias", "bias", optional=True))
_BN = simple(
    ("weight", "gamma"), ("bias", "beta"), ("running_mean", "moving_mean"), ("running_var", "moving_variance")
)


def _lstm_params(lstm) -> list[tuple[str, object]]:
    """(canonical suffix, Parameter) of an ``nn.LSTM``: its lists hold one entry per
    layer and direction, forward first, as PyTorch's names count them."""
    from dlbench.models.weights.recurrent import suffixes

    dirs = 2 if lstm.bidirectional else 1
    out = []
    lists = (lstm.w_ih_list, lstm.w_hh_list, lstm.b_ih_list, lstm.b_hh_list)
    for i in range(len(lstm.w_ih_list)):
        names = suffixes(i // dirs, i % dirs == 1)
        for name, params in zip(names, lists):
            if len(params):  # has_bias=False: no bias lists
                out.append((name, params[i]))
    return out


def _lstm_export(lstm) -> dict[str, np.ndarray]:
    return {n: p.asnumpy().astype(np.float32) for n, p in _lstm_params(lstm)}


def _lstm_load(lstm, mine: dict[str, np.ndarray]) -> None:
    from dlbench.models.weights.recurrent import take

    params = _lstm_params(lstm)
    arrays = take(mine, {n: tuple(p.shape) for n, p in params})
    for n, p in params:
        p.set_data(ms.Tensor(np.ascontiguousarray(arrays[n]), p.dtype))


# Layer class -> Rule.  Add a layer type here and in the PyTorch and Keras tables.
RULES: dict[type, Rule] = {
    nn.Conv1d: _WEIGHT_BIAS,
    nn.Conv2d: _WEIGHT_BIAS,
    # (in, out, kH, kW) natively, as PyTorch's ConvTranspose2d: no conversion.
    nn.Conv2dTranspose: _WEIGHT_BIAS,
    nn.Dense: _WEIGHT_BIAS,
    nn.BatchNorm1d: _BN,
    nn.BatchNorm2d: _BN,
    nn.Embedding: simple(("weight", "embedding_table")),
    nn.LSTM: Rule(export=_lstm_export, load=_lstm_load),
    nn.LayerNorm: simple(("weight", "gamma"), ("bias", "beta")),
    nn.PReLU: simple(("weight", "w")),  # slopes, one per unit (DIN)
    # BERT's masked-LM decoder owns only its bias; its weight is the word embeddings'.
    BertTiedDecoder: simple(("bias", "bias")),
    # SSD's conv4_3 L2 normalization: one learned scale per channel.
    SsdL2Norm: simple(("weight", "weight")),
}


def _get(cell, attr: str):
    for part in attr.split("."):
        cell = getattr(cell, part, None)
        if cell is None:
            return None
    return cell


def _read(cell, attr: str) -> np.ndarray | None:
    p = _get(cell, attr)
    return None if p is None else p.asnumpy().astype(np.float32)


def _write(cell, attr: str, value: np.ndarray) -> None:
    p = _get(cell, attr)
    p.set_data(ms.Tensor(np.ascontiguousarray(value), p.dtype))


def _own_weights(cell) -> int:
    return sum(1 for _ in cell.parameters_and_names(expand=False))


def layers(net):
    return ruled_layers(((n, c) for n, c in net.cells_and_names() if n), RULES, _own_weights, "mindspore")


def export_weights(net) -> OrderedDict[str, np.ndarray]:
    return export_layers(layers(net), _read)


def import_weights(net, weights: dict[str, np.ndarray]):
    import_layers(layers(net), weights, _read, _write, "mindspore")
    return net
