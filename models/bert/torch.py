"""BERT in PyTorch (``torch.nn``), following ``models.bert.walk``.

Module names follow Hugging Face's ``BertModel`` (``embeddings.word_embeddings``,
``encoder.layer.0.attention.self.query``, ``encoder.layer.0.output.LayerNorm``,
``pooler.dense``) because the weight-transfer rules map layers across
frameworks by name, and those names are what BERT checkpoints use everywhere.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dlbench.models.bert import INIT_STD, LAYER_NORM_EPS, MASK_VALUE, check_head, config_with, example_inputs
from dlbench.models.registry import ModelSpec


class Embeddings(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        hidden = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], hidden)
        self.position_embeddings = nn.Embedding(cfg["max_position"], hidden)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(cfg["dropout"])

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)[None]
            + self.token_type_embeddings(token_type_ids)
        )
        return self.dropout(self.LayerNorm(x))


class ScaledDotProduct(nn.Module):
    """softmax(q k^T / sqrt(d) + mask) v over (batch, heads, seq, head_size) tensors."""

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, additive_mask):
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        probs = self.dropout(torch.softmax(scores + additive_mask, dim=-1))
        return torch.matmul(probs, v)


class SelfAttention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        hidden = cfg["hidden"]
        self.heads = cfg["heads"]
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.core = ScaledDotProduct(cfg["dropout"])

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        return x.view(b, t, self.heads, h // self.heads).transpose(1, 2)

    def forward(self, x, additive_mask):
        ctx = self.core(
            self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x)), additive_mask
        )
        b, _, t, _ = ctx.shape
        return ctx.transpose(1, 2).reshape(b, t, -1)


class DenseAddNorm(nn.Module):
    """dense -> dropout -> residual add -> LayerNorm (BERT's ``*Output`` blocks)."""

    def __init__(self, cin: int, hidden: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(cin, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = DenseAddNorm(cfg["hidden"], cfg["hidden"], cfg["dropout"])

    def forward(self, x, additive_mask):
        return self.output(self.self(x, additive_mask), x)


class Intermediate(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden"], cfg["intermediate"])
        self.act = nn.GELU(approximate="none")  # exact erf GELU, as BERT's

    def forward(self, x):
        return self.act(self.dense(x))


class Layer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = DenseAddNorm(cfg["intermediate"], cfg["hidden"], cfg["dropout"])

    def forward(self, x, additive_mask):
        x = self.attention(x, additive_mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg) for _ in range(cfg["layers"]))

    def forward(self, x, additive_mask):
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class Pooler(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class TiedDecoder(nn.Module):
    """x @ table^T + bias: owns only the bias; the table is the word-embedding weight."""

    def __init__(self, vocab: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, x, table: torch.Tensor):
        return F.linear(x, table, self.bias)


class MLMHead(nn.Module):
    """transform (dense, GELU, LayerNorm), then logits against the word-embedding table."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden"], cfg["hidden"])
        self.act = nn.GELU(approximate="none")
        self.LayerNorm = nn.LayerNorm(cfg["hidden"], eps=LAYER_NORM_EPS)
        self.decoder = TiedDecoder(cfg["vocab_size"])

    def forward(self, x, word_embeddings: torch.Tensor):
        return self.decoder(self.LayerNorm(self.act(self.dense(x))), word_embeddings)


class Bert(nn.Module):
    """Encoder + pooler + the chosen head; see ``models.bert`` for the two heads."""

    def __init__(self, cfg: dict, head: str = "classification"):
        super().__init__()
        self.head = check_head(head)
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)
        self.pooler = Pooler(cfg["hidden"])
        if head == "classification":
            self.dropout = nn.Dropout(cfg["dropout"])
            self.classifier = nn.Linear(cfg["hidden"], cfg["num_classes"])
        else:
            self.mlm = MLMHead(cfg)
            self.nsp = nn.Linear(cfg["hidden"], 2)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, INIT_STD)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, input_ids, token_type_ids, attention_mask):
        # (batch, 1, 1, seq): broadcast over heads and query positions.
        additive = (1.0 - attention_mask[:, None, None, :].float()) * MASK_VALUE
        x = self.encoder(self.embeddings(input_ids, token_type_ids), additive)
        pooled = self.pooler(x)
        if self.head == "classification":
            return self.classifier(self.dropout(pooled))
        return self.mlm(x, self.embeddings.word_embeddings.weight), self.nsp(pooled)


def build(spec: ModelSpec, seed: int | None = None, head: str = "classification", **overrides: Any) -> Bert:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` seeds torch's global generator first, so that a builder called on
    its own gets reproducible weights.
    """
    cfg = config_with(spec, overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return Bert(cfg, head)


def pretraining_loss(outputs, labels) -> torch.Tensor:
    """Masked-LM cross-entropy over positions whose label is not -100, plus NSP cross-entropy.

    ``outputs`` = (mlm_logits (B, T, V), nsp_logits (B, 2)); ``labels`` =
    (mlm_labels (B, T), nsp_labels (B,)), integer arrays of any int dtype.
    """
    mlm_logits, nsp_logits = outputs
    mlm_labels, nsp_labels = labels
    mlm = F.cross_entropy(
        mlm_logits.float().reshape(-1, mlm_logits.shape[-1]), mlm_labels.reshape(-1).long(), ignore_index=-100
    )
    return mlm + F.cross_entropy(nsp_logits.float(), nsp_labels.long())


def forward_macs(model: nn.Module, spec: ModelSpec, inputs=None) -> int:
    """Multiply-adds of one forward pass, per sample, on ``inputs`` (numpy arrays;
    default: one ``example_inputs`` sequence of ``spec``).

    Measured with ``torch.utils.flop_counter``, which counts every matrix
    product the network really runs (linear layers, attention products, the
    tied decoder): an extra or missing product shows, unlike a sum over layers.
    """
    from torch.utils.flop_counter import FlopCounterMode

    if inputs is None:
        inputs = example_inputs(spec.config, 1)
    tensors = [torch.from_numpy(a) for a in inputs]
    was_training = model.training
    try:
        model.eval()
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(*tensors)
    finally:
        model.train(was_training)
    return counter.get_total_flops() // 2 // tensors[0].shape[0]
