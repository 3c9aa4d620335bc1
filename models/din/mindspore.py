"""DIN in MindSpore (see ``models.din`` for the configuration and the choices).

Every Cell lives in this file (or BERT's, whose ``Dense`` and ``Embedding`` it
uses) because GRAPH_MODE compiles the Python source of ``construct``.  Shapes
read in ``construct`` become constants of an exported graph, so nothing here
reads the batch: BERT's ``Dense`` is one MatMul on the last axis (the stock
Cell flattens to 2-D and reshapes back to the traced batch), its ``Embedding``
one Gather, and the candidate is broadcast over the sequence by adding it to
``keys * 0`` rather than by a ``broadcast_to`` of a traced shape.  Attribute
names make the parameter names read like the PyTorch keys
(``item_embedding.embedding_table``, ``attention.0.weight``, ``mlp.1.w``).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Normal, Uniform

from dlbench.models.bert.mindspore import Dense, Embedding
from dlbench.models.din import PAD_ID, PRELU_INIT, embed_dim
from dlbench.models.registry import ModelSpec


class PReLU(nn.PReLU):
    """One slope per unit of the LAST axis (``nn.PReLU`` applies its slopes on axis 1,
    the sequence of the attention's (batch, seq, units)); the parameter is ``w``."""

    def __init__(self, units: int):
        super().__init__(channel=units, w=PRELU_INIT)

    def construct(self, x):
        return ops.relu(x) - self.w * ops.relu(-x)


def _dense(cin: int, cout: int) -> nn.Dense:
    bound = 1.0 / math.sqrt(cin)
    return Dense(cin, cout, weight_init=Uniform(bound), bias_init=Uniform(bound))


def mlp(width: int, hidden: tuple[int, ...], out: int) -> nn.SequentialCell:
    cells = []
    for units in hidden:
        cells += [_dense(width, units), PReLU(units)]
        width = units
    return nn.SequentialCell(cells + [_dense(width, out)])


class DIN(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        d = embed_dim(cfg)
        self.item_embedding = Embedding(cfg["items"], cfg["item_dim"], embedding_table=Normal(1.0))
        self.category_embedding = Embedding(
            cfg["categories"], cfg["category_dim"], embedding_table=Normal(1.0)
        )
        self.attention = mlp(4 * d, cfg["attention_units"], 1)
        self.mlp = mlp(2 * d, cfg["mlp_units"], cfg["num_classes"])

    def embed(self, items, cats):
        return ops.concat((self.item_embedding(items), self.category_embedding(cats)), -1)

    def construct(self, hist_items, hist_cats, item, category):
        keys = self.embed(hist_items, hist_cats)  # (B, T, D)
        query = self.embed(item, category)  # (B, 1, D)
        q = keys * 0.0 + query
        scores = self.attention(ops.concat((q, keys, q - keys, q * keys), -1))
        # Unnormalized weights (no softmax, as the paper); padding weighs nothing.
        mask = ops.cast(ops.not_equal(hist_items, PAD_ID), keys.dtype)
        weights = ops.squeeze(scores, -1) * mask
        interest = ops.sum(ops.expand_dims(weights, -1) * keys, 1)
        return self.mlp(ops.concat((interest, ops.squeeze(query, 1)), -1))


def build(spec: ModelSpec, seed: int | None = None, **overrides) -> DIN:
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return DIN(cfg)
