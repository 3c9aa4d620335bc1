"""BERT in MindSpore (``mindspore.nn``), following ``models.bert.walk``.

Every Cell lives in this file because GRAPH_MODE compiles the Python source of
``construct``.  Reshapes leave the batch dimension as -1: shapes read in
``construct`` become constants of an exported graph (MindSpore exports at
batch 1), and a -1 keeps the exported file valid for any batch.  Attribute names make MindSpore's
automatic parameter names read
like the PyTorch keys (``embeddings.word_embeddings.embedding_table``,
``encoder.layer.0.attention.self.query.weight``,
``encoder.layer.0.output.LayerNorm.gamma``) for the weight-transfer rules.

MindSpore's ``nn.GELU`` defaults to the tanh approximation
(``approximate=True``); BERT's is the exact erf form, so it is built with
``approximate=False`` everywhere.  ``nn.LayerNorm``'s default epsilon is 1e-7;
BERT's 1e-12 is passed explicitly.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.common.initializer import Normal

from dlbench.models.bert import (
    IGNORE_INDEX,
    INIT_STD,
    LAYER_NORM_EPS,
    MASK_VALUE,
    check_head,
    config_with,
    example_inputs,
)
from dlbench.models.registry import ModelSpec


class Dense(nn.Dense):
    """``nn.Dense`` applied to the last axis by one MatMul (the same product).

    The stock Cell flattens a (batch, seq, in) input to 2-D and reshapes the
    result back to a shape read in ``construct``, which an exported graph
    keeps as a constant batch (see ``Embedding``).  Parameters and the
    weight-transfer rule are ``nn.Dense``'s.
    """

    def construct(self, x):
        y = ops.matmul(x, ops.transpose(self.weight, (1, 0)))
        return y + self.bias if self.has_bias else y


def _dense(cin: int, cout: int) -> nn.Dense:
    return Dense(cin, cout, weight_init=Normal(INIT_STD), bias_init="zeros")


def _layer_norm(hidden: int) -> nn.LayerNorm:
    return nn.LayerNorm((hidden,), epsilon=LAYER_NORM_EPS)


class Embedding(nn.Embedding):
    """``nn.Embedding`` as one Gather of the table (the same look-up).

    The stock Cell flattens the ids and reshapes the result to a shape it reads
    in ``construct``; an exported graph keeps that shape as a constant, so a
    file exported at batch 1 would take batch 1 only.  The subclass keeps the
    parameter (``embedding_table``) and the weight-transfer rule.
    """

    def construct(self, ids):
        return ops.gather(self.embedding_table, ids, 0)


def _embedding(rows: int, hidden: int) -> nn.Embedding:
    return Embedding(rows, hidden, embedding_table=Normal(INIT_STD))


def _dropout(p: float) -> nn.Dropout:
    return nn.Dropout(p=p)


class Embeddings(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        hidden = cfg["hidden"]
        self.word_embeddings = _embedding(cfg["vocab_size"], hidden)
        self.position_embeddings = _embedding(cfg["max_position"], hidden)
        self.token_type_embeddings = _embedding(cfg["type_vocab_size"], hidden)
        self.LayerNorm = _layer_norm(hidden)
        self.dropout = _dropout(cfg["dropout"])
        # A constant, not a Parameter: it is not trained and not checkpointed.
        self.position_ids = ms.Tensor(np.arange(cfg["max_position"])[None], ms.int32)

    def construct(self, input_ids, token_type_ids):
        seq = input_ids.shape[1]
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(self.position_ids[:, :seq])
            + self.token_type_embeddings(token_type_ids)
        )
        return self.dropout(self.LayerNorm(x))


class ScaledDotProduct(nn.Cell):
    """softmax(q k^T / sqrt(d) + mask) v over (batch, heads, seq, head_size) tensors."""

    def __init__(self, head_size: int, dropout: float):
        super().__init__()
        self.scores = ops.BatchMatMul(transpose_b=True)
        self.context = ops.BatchMatMul()
        self.scale = 1.0 / math.sqrt(head_size)
        self.softmax = nn.Softmax(axis=-1)
        self.dropout = _dropout(dropout)

    def construct(self, q, k, v, additive_mask):
        probs = self.softmax(self.scores(q, k) * self.scale + additive_mask)
        return self.context(self.dropout(probs), v)


class SelfAttention(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        hidden = cfg["hidden"]
        self.heads = cfg["heads"]
        self.head_size = hidden // self.heads
        self.query = _dense(hidden, hidden)
        self.key = _dense(hidden, hidden)
        self.value = _dense(hidden, hidden)
        self.core = ScaledDotProduct(self.head_size, cfg["dropout"])

    def _split(self, x):
        return ops.transpose(ops.reshape(x, (-1, x.shape[1], self.heads, self.head_size)), (0, 2, 1, 3))

    def construct(self, x, additive_mask):
        ctx = self.core(
            self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x)), additive_mask
        )
        return ops.reshape(ops.transpose(ctx, (0, 2, 1, 3)), (-1, x.shape[1], self.heads * self.head_size))


class DenseAddNorm(nn.Cell):
    """dense -> dropout -> residual add -> LayerNorm (BERT's ``*Output`` blocks)."""

    def __init__(self, cin: int, hidden: int, dropout: float):
        super().__init__()
        self.dense = _dense(cin, hidden)
        self.LayerNorm = _layer_norm(hidden)
        self.dropout = _dropout(dropout)

    def construct(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class Attention(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = DenseAddNorm(cfg["hidden"], cfg["hidden"], cfg["dropout"])

    def construct(self, x, additive_mask):
        return self.output(self.self(x, additive_mask), x)


class Intermediate(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        self.dense = _dense(cfg["hidden"], cfg["intermediate"])
        self.act = nn.GELU(approximate=False)

    def construct(self, x):
        return self.act(self.dense(x))


class Layer(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = DenseAddNorm(cfg["intermediate"], cfg["hidden"], cfg["dropout"])

    def construct(self, x, additive_mask):
        x = self.attention(x, additive_mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        self.layer = nn.CellList([Layer(cfg) for _ in range(cfg["layers"])])

    def construct(self, x, additive_mask):
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class Pooler(nn.Cell):
    def __init__(self, hidden: int):
        super().__init__()
        self.dense = _dense(hidden, hidden)
        self.tanh = nn.Tanh()

    def construct(self, x):
        return self.tanh(self.dense(x[:, 0]))


class TiedDecoder(nn.Cell):
    """x @ table^T + bias: owns only the bias; the table is the word-embedding weight."""

    def __init__(self, vocab: int):
        super().__init__()
        self.bias = ms.Parameter(ms.Tensor(np.zeros(vocab, np.float32)), name="bias")
        self.matmul = ops.MatMul(transpose_b=True)

    def construct(self, x, table):
        logits = self.matmul(ops.reshape(x, (-1, x.shape[2])), table) + self.bias
        return ops.reshape(logits, (-1, x.shape[1], table.shape[0]))


class MLMHead(nn.Cell):
    """transform (dense, GELU, LayerNorm), then logits against the word-embedding table."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.dense = _dense(cfg["hidden"], cfg["hidden"])
        self.act = nn.GELU(approximate=False)
        self.LayerNorm = _layer_norm(cfg["hidden"])
        self.decoder = TiedDecoder(cfg["vocab_size"])

    def construct(self, x, word_embeddings):
        return self.decoder(self.LayerNorm(self.act(self.dense(x))), word_embeddings)


class Bert(nn.Cell):
    """Encoder + pooler + the chosen head; see ``models.bert`` for the two heads."""

    def __init__(self, cfg: dict, head: str = "classification"):
        super().__init__()
        self.pretraining = check_head(head) == "pretraining"
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)
        self.pooler = Pooler(cfg["hidden"])
        if self.pretraining:
            self.mlm = MLMHead(cfg)
            self.nsp = _dense(cfg["hidden"], 2)
        else:
            self.dropout = _dropout(cfg["dropout"])
            self.classifier = _dense(cfg["hidden"], cfg["num_classes"])

    def construct(self, input_ids, token_type_ids, attention_mask):
        # (batch, 1, 1, seq): broadcast over heads and query positions.
        additive = (
            1.0 - ops.reshape(attention_mask.astype(ms.float32), (-1, 1, 1, attention_mask.shape[1]))
        ) * MASK_VALUE
        x = self.encoder(self.embeddings(input_ids, token_type_ids), additive)
        pooled = self.pooler(x)
        if self.pretraining:
            return self.mlm(x, self.embeddings.word_embeddings.embedding_table), self.nsp(pooled)
        return self.classifier(self.dropout(pooled))


def build(spec: ModelSpec, seed: int | None = None, head: str = "classification", **overrides) -> Bert:
    """The network for ``spec``; ``overrides`` replace ``spec.config`` entries.

    ``seed`` calls ``mindspore.set_seed`` first, so that a builder called on
    its own gets reproducible weights.
    """
    cfg = config_with(spec, overrides)
    if seed is not None:
        ms.set_seed(seed)
    return Bert(cfg, head)


class PretrainingLoss(nn.Cell):
    """Masked-LM cross-entropy over positions whose label is not -100, plus NSP cross-entropy.

    ``construct(outputs, mlm_labels, nsp_labels)`` with ``outputs`` the
    pre-training network's ``(mlm_logits, nsp_logits)`` (the contract of
    ``harness.training.objectives``).  Written with log-softmax and a gather
    rather than a one-hot product: a one-hot of (batch x seq, vocab) would
    double the memory of BERT-Large's logits.
    """

    def __init__(self):
        super().__init__()
        self.log_softmax = nn.LogSoftmax(axis=-1)

    def _nll(self, logits, labels):
        logp = self.log_softmax(logits.astype(ms.float32))
        keep = (labels != IGNORE_INDEX).astype(ms.float32)
        safe = ops.maximum(labels, 0).astype(ms.int32)
        picked = ops.gather_elements(logp, 1, ops.reshape(safe, (-1, 1)))
        return -ops.sum(ops.reshape(picked, (-1,)) * keep) / ops.sum(keep)

    def construct(self, outputs, mlm_labels, nsp_labels):
        mlm_logits, nsp_logits = outputs
        vocab = mlm_logits.shape[-1]
        mlm = self._nll(ops.reshape(mlm_logits, (-1, vocab)), ops.reshape(mlm_labels, (-1,)))
        return mlm + self._nll(nsp_logits, ops.reshape(nsp_labels, (-1,)))


class WithPretrainingLoss(nn.Cell):
    """The pre-training network and its loss as one Cell, for ``nn.TrainOneStepCell``.

    ``auto_prefix=False`` keeps the wrapped network's parameter names, so a
    checkpoint of the bare network loads either way.
    """

    def __init__(self, net: nn.Cell):
        super().__init__(auto_prefix=False)
        self.net = net
        self.loss = PretrainingLoss()

    def construct(self, input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels):
        return self.loss(self.net(input_ids, token_type_ids, attention_mask), mlm_labels, nsp_labels)


def forward_macs(model: nn.Cell, spec: ModelSpec, inputs=None) -> int:
    """Multiply-adds of one forward pass, per sample, on ``inputs`` (numpy arrays;
    default: one ``example_inputs`` sequence of ``spec``).

    Forward hooks on every ``nn.Dense`` (real output shape), every attention
    product (real q and k shapes) and the tied decoder (real table shape);
    hooks fire only in PyNative mode, so the mode is switched for the probe
    and restored after.
    """
    from dlbench.models.counting.mindspore import trace

    if inputs is None:
        inputs = example_inputs(spec.config, 1)
    macs = []

    def dense_hook(cell, _args, out):
        macs.append(int(np.prod(out.shape[:-1])) * cell.in_channels * cell.out_channels)

    def attention_hook(_cell, args, _out):
        q, k = args[0], args[1]
        b, heads, t, d = q.shape
        macs.append(2 * b * heads * t * k.shape[2] * d)

    def decoder_hook(_cell, args, out):
        macs.append(int(np.prod(out.shape)) * args[1].shape[1])

    hooks = {nn.Dense: dense_hook, ScaledDotProduct: attention_hook, TiedDecoder: decoder_hook}
    handles = [
        cell.register_forward_hook(hook)
        for _, cell in model.cells_and_names()
        for kind, hook in hooks.items()
        if isinstance(cell, kind)
    ]
    trace(model, handles, list(inputs))
    return int(sum(macs)) // int(inputs[0].shape[0])


def onnx_rewrites(net: nn.Cell) -> list[str]:
    """What ``converters.mindspore_to_onnx`` applies before an ONNX export: the
    exporter cannot convert exact GELU's ``Erf`` (see ``models.bert.mindspore_onnx``)."""
    from dlbench.models.bert.mindspore_onnx import onnx_rewrites as rewrite

    return rewrite(net)
