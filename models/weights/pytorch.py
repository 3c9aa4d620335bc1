"""Canonical weights from and into a PyTorch ``nn.Module``.

The canonical format *is* PyTorch's layout, so every conversion here is the
identity; the rules still list each layer type's arrays so that an unknown
weighted layer fails loudly instead of being copied by accident.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch
from torch import nn

from dlbench.models.bert.torch import TiedDecoder as BertTiedDecoder
from dlbench.models.ssd.torch import L2Norm as SsdL2Norm
from dlbench.models.weights.rules import Param, Rule, export_layers, import_layers, ruled_layers, simple

_NOT_WEIGHTS = {"num_batches_tracked"}  # a BN step counter, not part of the function

_BN = simple(
    Param("weight", "weight", optional=True),
    Param("bias", "bias", optional=True),
    Param("running_mean", "running_mean", optional=True),
    Param("running_var", "running_var", optional=True),
)
_WEIGHT_BIAS = simple(("weight", "weight"), Param("bias", "bias", optional=True))


def _lstm_export(lstm: nn.LSTM) -> dict[str, np.ndarray]:
    # The canonical LSTM arrays are nn.LSTM's own parameters (models.weights.recurrent).
    return {n: p.detach().float().cpu().numpy().copy() for n, p in lstm.named_parameters()}


def _lstm_load(lstm: nn.LSTM, mine: dict[str, np.ndarray]) -> None:
    from dlbench.models.weights.recurrent import take

    arrays = take(mine, {n: tuple(p.shape) for n, p in lstm.named_parameters()})
    with torch.no_grad():
        for n, p in lstm.named_parameters():
            p.copy_(torch.from_numpy(arrays[n]).to(p.dtype))


# Layer class -> Rule.  Add a layer type here and in the Keras and MindSpore tables.
RULES: dict[type, Rule] = {
    nn.Conv1d: _WEIGHT_BIAS,
    nn.Conv2d: _WEIGHT_BIAS,
    # Canonical (in, out, kH, kW) is PyTorch's own transposed-conv layout (Mask R-CNN).
    nn.ConvTranspose2d: _WEIGHT_BIAS,
    nn.Linear: _WEIGHT_BIAS,
    nn.BatchNorm1d: _BN,
    nn.BatchNorm2d: _BN,
    nn.Embedding: simple(("weight", "weight")),
    nn.LSTM: Rule(export=_lstm_export, load=_lstm_load),
    nn.LayerNorm: simple(("weight", "weight"), ("bias", "bias")),
    nn.PReLU: simple(("weight", "weight")),  # slopes, one per unit (DIN)
    # BERT's masked-LM decoder owns only its bias; its weight is the word embeddings'.
    BertTiedDecoder: simple(("bias", "bias")),
    # SSD's conv4_3 L2 normalization: one learned scale per channel.
    SsdL2Norm: simple(("weight", "weight")),
}


def _get(module: nn.Module, attr: str):
    for part in attr.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


def _read(module: nn.Module, attr: str) -> np.ndarray | None:
    t = _get(module, attr)
    # .copy(): numpy() of a CPU float32 tensor is a view of the live weights.
    return None if t is None else t.detach().float().cpu().numpy().copy()


def _write(module: nn.Module, attr: str, value: np.ndarray) -> None:
    t = _get(module, attr)
    with torch.no_grad():
        t.copy_(torch.from_numpy(np.ascontiguousarray(value)).to(t.dtype))


def _own_weights(module: nn.Module) -> int:
    return sum(1 for _ in module.parameters(recurse=False)) + sum(
        1 for n, _ in module.named_buffers(recurse=False) if n not in _NOT_WEIGHTS
    )


def layers(net: nn.Module):
    return ruled_layers(net.named_modules(), RULES, _own_weights, "pytorch")


def export_weights(net: nn.Module) -> OrderedDict[str, np.ndarray]:
    return export_layers(layers(net), _read)


def import_weights(net: nn.Module, weights: dict[str, np.ndarray]) -> nn.Module:
    import_layers(layers(net), weights, _read, _write, "pytorch")
    return net
