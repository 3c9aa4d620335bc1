"""DIN in PyTorch (see ``models.din`` for the configuration and the choices).

Keys read ``item_embedding.weight``, ``attention.0.weight``, ``attention.1.weight``
(a PReLU's slopes), ``mlp.4.bias``: the canonical names of ``models.weights``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dlbench.models.din import PAD_ID, PRELU_INIT, embed_dim
from dlbench.models.registry import ModelSpec


class PReLU(nn.PReLU):
    """One slope per unit of the LAST axis (``nn.PReLU`` puts its slopes on axis 1,
    which for the attention's (batch, seq, units) is the sequence)."""

    def __init__(self, units: int):
        super().__init__(num_parameters=units, init=PRELU_INIT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) - self.weight * torch.relu(-x)


def mlp(width: int, hidden: tuple[int, ...], out: int) -> nn.Sequential:
    """Dense + PReLU per hidden width, then a dense to ``out``: indices as the names say."""
    layers: list[nn.Module] = []
    for units in hidden:
        layers += [nn.Linear(width, units), PReLU(units)]
        width = units
    return nn.Sequential(*layers, nn.Linear(width, out))


class DIN(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        d = embed_dim(cfg)
        self.item_embedding = nn.Embedding(cfg["items"], cfg["item_dim"])
        self.category_embedding = nn.Embedding(cfg["categories"], cfg["category_dim"])
        self.attention = mlp(4 * d, cfg["attention_units"], 1)
        self.mlp = mlp(2 * d, cfg["mlp_units"], cfg["num_classes"])

    def embed(self, items: torch.Tensor, cats: torch.Tensor) -> torch.Tensor:
        return torch.cat((self.item_embedding(items), self.category_embedding(cats)), dim=-1)

    def forward(self, hist_items, hist_cats, item, category) -> torch.Tensor:
        keys = self.embed(hist_items, hist_cats)  # (B, T, D)
        query = self.embed(item, category)  # (B, 1, D)
        q = query.expand_as(keys)
        scores = self.attention(torch.cat((q, keys, q - keys, q * keys), dim=-1))
        # Unnormalized weights (no softmax, as the paper); padding weighs nothing.
        weights = scores.squeeze(-1) * (hist_items != PAD_ID).to(keys.dtype)
        interest = (weights.unsqueeze(-1) * keys).sum(dim=1)  # (B, D)
        return self.mlp(torch.cat((interest, query.squeeze(1)), dim=-1))


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> DIN:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.
    ``seed`` seeds torch's global generator first."""
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return DIN(cfg)
