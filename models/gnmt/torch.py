"""GNMT in PyTorch (see ``models.gnmt`` for the network and its choices).

Module paths are the canonical weight names: ``embedding``, ``encoder.{k}``
(one single-layer ``nn.LSTM`` per depth, ``encoder.0`` bidirectional),
``decoder.{k}``, ``attention.query`` / ``.key`` / ``.score`` and ``classifier``.
Every ``bias_hh_*`` is zero and frozen, as in ``models.lstm``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from dlbench.models.gnmt import BOS_ID, INIT_RANGE, MASK_VALUE, PAD_ID, check_decoder
from dlbench.models.registry import ModelSpec


class Attention(nn.Module):
    """Bahdanau: v · tanh(W_q q + b + W_k k), masked softmax, weights · values."""

    def __init__(self, hidden: int):
        super().__init__()
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.score = nn.Linear(hidden, 1, bias=False)

    def forward(self, query, keys, values, mask_add):
        # query (B, T, H), keys (B, S, H) projected once, values (B, S, H), mask_add (B, 1, S)
        q = self.query(query).unsqueeze(2)  # (B, T, 1, H)
        scores = self.score(torch.tanh(q + keys.unsqueeze(1))).squeeze(3) + mask_add
        return torch.bmm(torch.softmax(scores, dim=2), values)  # (B, T, H)


class GNMT(nn.Module):
    def __init__(self, vocab_size: int, hidden: int, layers: int, decoder: str, decode_len: int):
        super().__init__()
        self.decoder_kind, self.decode_len = check_decoder(decoder), decode_len
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.encoder = nn.ModuleList(
            [nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)]
            + [nn.LSTM(2 * hidden if k == 1 else hidden, hidden, batch_first=True) for k in range(1, layers)]
        )
        self.decoder = nn.ModuleList(
            [nn.LSTM(hidden, hidden, batch_first=True)]
            + [nn.LSTM(2 * hidden, hidden, batch_first=True) for _ in range(1, layers)]
        )
        self.attention = Attention(hidden)
        self.classifier = nn.Linear(hidden, vocab_size)
        for name, param in self.named_parameters():
            nn.init.uniform_(param, -INIT_RANGE, INIT_RANGE)
            if ".bias_hh" in name:
                nn.init.zeros_(param)
                param.requires_grad_(False)

    def encode(self, src):
        x = self.embedding(src)
        for k, lstm in enumerate(self.encoder):
            y, _ = lstm(x)
            x = y + x if k >= 2 else y
        mask_add = (src == PAD_ID).unsqueeze(1).to(x.dtype) * MASK_VALUE  # (B, 1, S)
        return x, self.attention.key(x), mask_add

    def decode(self, tokens, memory, states):
        """Decoder layers over ``tokens`` (B, T) from ``states`` (one (h, c) or None per
        layer); returns (logits (B, T, V), new states)."""
        values, keys, mask_add = memory
        x, s0 = self.decoder[0](self.embedding(tokens), states[0])
        context = self.attention(x, keys, values, mask_add)
        new = [s0]
        for k, lstm in enumerate(self.decoder[1:], 1):
            y, s = lstm(torch.cat((x, context), dim=2), states[k])
            x = y + x if k >= 2 else y
            new.append(s)
        return self.classifier(x), new

    def forward(self, src, tgt_in=None):
        memory = self.encode(src)
        states = [None] * len(self.decoder)
        if self.decoder_kind == "teacher":
            return self.decode(tgt_in, memory, states)[0]
        token = torch.full_like(src[:, :1], BOS_ID)
        steps = []
        for _ in range(self.decode_len):
            logits, states = self.decode(token, memory, states)
            steps.append(logits)
            token = logits.argmax(dim=2).to(src.dtype)
        return torch.cat(steps, dim=1)


def seq2seq_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the target positions that are not padding."""
    return nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1).long(), ignore_index=PAD_ID
    )


def forward_macs(model: GNMT, spec: ModelSpec) -> int:
    """Multiply-adds of one sample, measured: hooks on every LSTM and linear layer read
    the shapes they really produce, and the attention's context product is read off its
    query and values; a greedy network runs its steps one by one and each counts."""
    from dlbench.models.counting.pytorch import layer_macs

    total = 0

    def layer(module, _inputs, output):
        nonlocal total
        total += layer_macs(module, output)

    def context(_module, inputs, _output):
        nonlocal total
        query, _, values, _ = inputs
        total += query.shape[1] * values.shape[1] * values.shape[2]

    handles = [m.register_forward_hook(layer) for m in model.modules() if isinstance(m, (nn.Linear, nn.LSTM))]
    handles.append(model.attention.register_forward_hook(context))
    ids = [torch.from_numpy(np.full((1, *i.shape), 5, np.int32)) for i in spec.inputs]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(*ids)
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    return int(total)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> GNMT:
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return GNMT(cfg["vocab_size"], cfg["hidden"], cfg["layers"], cfg["decoder"], cfg["decode_len"])
