"""GNMT in MindSpore (see ``models.gnmt`` for the network and its choices).

Cell paths are the canonical weight names, as PyTorch's module paths: one
single-layer ``nn.LSTM`` per depth in ``encoder`` / ``decoder`` ``CellList``\\ s,
every ``bias_hh`` zero and frozen (as ``models.lstm``).  What keeps the exported
ONNX graph batch-independent (MindSpore's exporter writes every traced shape as a
constant), none of it changing the math:

* dense layers on (batch, steps, features) are one ``MatMul`` with the weight
  (``SeqDense``), where ``nn.Dense`` flattens to 2-D and reshapes back to the
  traced shape; the embedding is one ``Gather`` (``models.lstm``'s);
* the LSTMs' zero initial states are derived from the input (``0 * x`` tiled),
  where ``nn.LSTM`` would make a constant of the traced batch;
* the greedy decoder's first token is ``0 * src[:, :1] + BOS``, not a constant.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.common.initializer import Uniform, initializer

from dlbench.models.gnmt import BOS_ID, INIT_RANGE, MASK_VALUE, PAD_ID, check_decoder
from dlbench.models.lstm.mindspore import GatherEmbedding
from dlbench.models.registry import ModelSpec


class SeqDense(nn.Dense):
    """``nn.Dense`` (same parameters, same names) over any leading axes: x · Wᵀ + b."""

    def construct(self, x):
        y = ops.matmul(x, ops.transpose(self.weight, (1, 0)))
        return y + self.bias if self.has_bias else y


class Attention(nn.Cell):
    """Bahdanau: v · tanh(W_q q + b + W_k k), masked softmax, weights · values."""

    def __init__(self, hidden: int):
        super().__init__()
        self.query = SeqDense(hidden, hidden, has_bias=True)
        self.key = SeqDense(hidden, hidden, has_bias=False)
        self.score = SeqDense(hidden, 1, has_bias=False)

    def construct(self, query, keys, values, mask_add):
        energy = ops.tanh(ops.expand_dims(self.query(query), 2) + ops.expand_dims(keys, 1))
        scores = ops.squeeze(self.score(energy), 3) + mask_add
        return ops.bmm(ops.softmax(scores, 2), values)


class GNMT(nn.Cell):
    def __init__(self, vocab_size: int, hidden: int, layers: int, decoder: str, decode_len: int):
        super().__init__()
        self.greedy, self.decode_len = check_decoder(decoder) == "greedy", decode_len
        self.hidden, self.depth = hidden, layers
        self.embedding = GatherEmbedding(vocab_size, hidden)
        self.encoder = nn.CellList(
            [nn.LSTM(hidden, hidden, 1, has_bias=True, batch_first=True, bidirectional=True)]
            + [
                nn.LSTM(2 * hidden if k == 1 else hidden, hidden, 1, has_bias=True, batch_first=True)
                for k in range(1, layers)
            ]
        )
        self.decoder = nn.CellList(
            [
                nn.LSTM(hidden if k == 0 else 2 * hidden, hidden, 1, has_bias=True, batch_first=True)
                for k in range(layers)
            ]
        )
        self.attention = Attention(hidden)
        self.classifier = SeqDense(hidden, vocab_size, has_bias=True)
        frozen = {id(p) for lstm in (*self.encoder, *self.decoder) for p in lstm.b_hh_list}
        for param in self.get_parameters():
            zero = id(param) in frozen
            param.set_data(initializer("zeros" if zero else Uniform(INIT_RANGE), param.shape, ms.float32))
            if zero:
                param.requires_grad = False

    def zero_state(self, x, directions: int = 1):
        zero = ops.transpose(x[:, 0:1, 0:1], (1, 0, 2)) * 0.0  # (1, batch, 1)
        h0 = ops.tile(zero, (directions, 1, self.hidden))
        return h0, h0

    def decode(self, tokens, values, keys, mask_add, states):
        x, s0 = self.decoder[0](self.embedding(tokens), states[0])
        context = self.attention(x, keys, values, mask_add)
        new = [s0]
        for k in range(1, self.depth):
            y, s = self.decoder[k](ops.concat((x, context), 2), states[k])
            x = y + x if k >= 2 else y
            new.append(s)
        return self.classifier(x), new

    def construct(self, src, tgt_in=None):
        x = self.embedding(src)
        for k in range(self.depth):
            y, _ = self.encoder[k](x, self.zero_state(x, 2 if k == 0 else 1))
            x = y + x if k >= 2 else y
        values, keys = x, self.attention.key(x)
        mask_add = ops.expand_dims(ops.cast(ops.equal(src, PAD_ID), ms.float32) * MASK_VALUE, 1)
        zero = self.zero_state(x)
        states = [zero] * self.depth
        if not self.greedy:
            return self.decode(tgt_in, values, keys, mask_add, states)[0]
        token = src[:, 0:1] * 0 + BOS_ID
        steps = []
        for _ in range(self.decode_len):
            logits, states = self.decode(token, values, keys, mask_add, states)
            steps.append(logits)
            token = ops.cast(ops.argmax(logits, 2), src.dtype)
        return ops.concat(steps, 1)


class Seq2SeqLoss(nn.Cell):
    """Mean cross-entropy over the target positions that are not padding."""

    def __init__(self):
        super().__init__()
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="none")

    def construct(self, logits, labels):
        labels = labels.reshape(-1)
        nll = self.ce(ops.cast(logits, ms.float32).reshape(-1, logits.shape[-1]), labels)
        keep = ops.cast(labels != PAD_ID, ms.float32)
        return (nll * keep).sum() / ops.maximum(keep.sum(), 1.0)


def forward_macs(model: GNMT, spec: ModelSpec) -> int:
    """Multiply-adds of one sample, from hooks on every LSTM and dense layer (at the
    shapes they produce; a greedy network counts each step) and the attention's
    context product; a PyNative batch-1 forward, the mode restored after."""
    from dlbench.models.counting.mindspore import one_sample, trace

    macs = []

    def lstm_hook(cell, _args, out):
        steps = out[0].shape[1]
        macs.append(steps * sum(int(np.prod(w.shape)) for w in (*cell.w_ih_list, *cell.w_hh_list)))

    def dense_hook(cell, _args, out):
        macs.append(int(np.prod(out.shape[1:-1])) * cell.in_channels * cell.out_channels)

    def context_hook(_cell, args, _out):
        query, _, values, _ = args
        macs.append(query.shape[1] * values.shape[1] * values.shape[2])

    handles = [model.attention.register_forward_hook(context_hook)]
    for _, cell in model.cells_and_names():
        if isinstance(cell, nn.LSTM):
            handles.append(cell.register_forward_hook(lstm_hook))
        elif isinstance(cell, SeqDense):
            handles.append(cell.register_forward_hook(dense_hook))
    trace(model, handles, one_sample(spec, fill=5))
    return int(sum(macs))


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> GNMT:
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return GNMT(cfg["vocab_size"], cfg["hidden"], cfg["layers"], cfg["decoder"], cfg["decode_len"])
