"""The LSTM sentiment classifier in PyTorch (see ``models.lstm`` for the choices).

The stack is one single-layer ``nn.LSTM`` per depth (``lstm.0``, ``lstm.1``),
the same function as one ``nn.LSTM(num_layers=2)`` without dropout, so that
every framework has a layer of the same name per depth: keys read
``embedding.weight``, ``lstm.0.weight_ih_l0``, ``lstm.1.bias_hh_l0_reverse``,
``fc.weight`` (the canonical names of ``models.weights``).  Every
``bias_hh_*`` is zero and frozen, so trainable parameters match Keras'
single-bias LSTM.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models.registry import ModelSpec


class LSTMClassifier(nn.Module):
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
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        width = hidden_size * (2 if bidirectional else 1)
        self.lstm = nn.ModuleList(
            nn.LSTM(
                embedding_dim if depth == 0 else width,
                hidden_size,
                batch_first=True,
                bidirectional=bidirectional,
            )
            for depth in range(num_layers)
        )
        for name, param in self.lstm.named_parameters():
            if ".bias_hh" in name:
                nn.init.zeros_(param)
                param.requires_grad_(False)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids)
        for lstm in self.lstm:
            x, (h_n, _) = lstm(x)
        # The top layer's h_n: (directions, batch, hidden), forward first.
        final = torch.cat((h_n[0], h_n[1]), dim=1) if self.bidirectional else h_n[0]
        return self.fc(final)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> LSTMClassifier:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds torch's global generator first (reproducible weights when
    the builder is called on its own).
    """
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return LSTMClassifier(
        cfg["vocab_size"],
        cfg["embedding_dim"],
        cfg["hidden_size"],
        cfg["num_layers"],
        cfg["bidirectional"],
        cfg["num_classes"],
    )
