"""The LSTM sentiment classifier in MindSpore (see ``models.lstm`` for the choices).

Parameter names match PyTorch's state-dict keys (``embedding.embedding_table``
for ``embedding.weight``, ``lstm.0.weight_ih_l0``, ..., ``fc.weight``): one
single-layer ``nn.LSTM`` per depth in a ``CellList``, as in PyTorch.  Every
``bias_hh_*`` is zero and frozen (``requires_grad=False``), as in PyTorch.

Three details keep the exported ONNX graph batch-independent (MindSpore's ONNX
exporter writes every shape it traced as a constant); none changes the math:

* the embedding lookup is one ``Gather`` on the (batch, sequence) ids, where
  ``nn.Embedding`` flattens the ids and reshapes back to the traced shape;
* the zero initial state is derived from the input (``0 * x`` tiled), where
  ``nn.LSTM`` would create a constant of the traced batch;
* final states are indexed with non-negative indices: the exporter turns
  ``h_n[-1]`` into an empty slice.
The remaining traced ``Reshape``s in ``nn.LSTM`` are made batch-independent
after export (``converters.mindspore_to_onnx``).
"""

from __future__ import annotations

import math
import os
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Normal, Uniform, initializer

from dlbench.models.registry import ModelSpec


class GatherEmbedding(nn.Embedding):
    """``nn.Embedding`` (same table, same name) looked up with one Gather."""

    def construct(self, ids):
        return ops.gather(self.embedding_table, ids, 0)


class LSTMClassifier(nn.Cell):
    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        num_classes: int,
    ):
        super().__init__()
        self.bidirectional = bidirectional
        self.hidden_size = hidden_size
        self.directions = 2 if bidirectional else 1
        self.embedding = GatherEmbedding(vocab_size, embedding_dim, embedding_table=Normal(sigma=1.0))
        width = hidden_size * self.directions
        self.lstm = nn.CellList(
            [
                nn.LSTM(
                    embedding_dim if depth == 0 else width,
                    hidden_size,
                    1,
                    has_bias=True,
                    batch_first=True,
                    bidirectional=bidirectional,
                )
                for depth in range(num_layers)
            ]
        )
        # nn.LSTM draws its weights from numpy's global generator; drawing them
        # again through MindSpore's initializer makes ms.set_seed govern them.
        stdv = 1 / math.sqrt(hidden_size)
        for lstm in self.lstm:
            for param in (*lstm.w_ih_list, *lstm.w_hh_list, *lstm.b_ih_list):
                param.set_data(initializer(Uniform(stdv), param.shape, ms.float32))
            for param in lstm.b_hh_list:
                param.set_data(initializer("zeros", param.shape, ms.float32))
                param.requires_grad = False
        bound = 1 / math.sqrt(width)
        self.fc = nn.Dense(width, num_classes, weight_init=Uniform(bound), bias_init=Uniform(bound))

    def construct(self, ids):
        x = self.embedding(ids)
        zero = ops.transpose(x[:, 0:1, 0:1], (1, 0, 2)) * 0.0  # (1, batch, 1)
        h0 = ops.tile(zero, (self.directions, 1, self.hidden_size))
        h_n = h0
        for lstm in self.lstm:
            x, (h_n, _) = lstm(x, (h0, h0))
        # The top layer's h_n: (directions, batch, hidden), forward first.
        final = ops.concat((h_n[0], h_n[1]), 1) if self.bidirectional else h_n[0]
        return self.fc(final)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> LSTMClassifier:
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return LSTMClassifier(
        cfg["vocab_size"],
        cfg["embedding_dim"],
        cfg["hidden_size"],
        cfg["num_layers"],
        cfg["bidirectional"],
        cfg["num_classes"],
    )
