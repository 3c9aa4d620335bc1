"""DIN, the Deep Interest Network (Zhou et al., "Deep Interest Network for Click-Through
Rate Prediction", KDD 2018), written once per framework in this folder.

The configuration is the paper's Amazon (Electronics) one as its authors' code
runs it (DeepInterestNetwork, and DIEN's ``train.py`` on the same data):

* An item is its goods id and its category id, each embedded in 18 dimensions
  and concatenated: 36 dimensions per item (DIEN's ``EMBEDDING_DIM = 18``).
  Table sizes are the Amazon Electronics counts of the DIN repository
  (``item_count`` 63,001, ``cate_count`` 801); id 0 is the padding id.
* Inputs (int32, in call order): ``hist_items`` and ``hist_cats`` (the user's
  behaviour sequence, ``seq_len`` = 100 ids, most recent last, padded with 0 at
  the end), ``item`` and ``category`` (the candidate ad, shape (1,) per sample).
  The mask is derived inside the network from ``hist_items != 0``, so no length
  input exists.  No user-id embedding: the authors' code has none, and neither
  has the paper's Amazon model (no user-profile features).
* The local activation unit (the paper's Fig. 2) scores each behaviour ``k``
  against the candidate ``q`` with an MLP on ``[q, k, q - k, q * k]`` (4 x 36 =
  144 inputs; the paper's "out product" is the authors' code's element-wise
  product), hidden layers 80 and 40, then a linear unit.  The weights are
  **not normalized**: no softmax, as the paper says (Sec. 4.3, "the constraint
  of sum w_i = 1 is relaxed" to keep the intensity of the user's interests);
  padded positions get weight 0 (multiplied by the mask).  The user interest is
  the weighted sum of the behaviour embeddings.
* The final MLP reads ``[interest, q]`` (72) through 200 and 80 hidden units to
  **2 logits** (the paper's Fig. 2: 200-80-2 with a softmax), trained with
  softmax cross-entropy on the click label.  Two logits instead of one: the
  network stays a 2-class classifier, so export, verification, the eval tally
  and every ``dlbench`` path that reads logits work unchanged, and softmax
  cross-entropy over two logits is exactly binary cross-entropy on their
  difference.  Training objective ``ctr`` (registry.OBJECTIVES): that loss,
  with the held-out score an AUC (``harness.evaluate.scoring``).
* Activations are **PReLU** (per unit, slope initialized 0.25), one of the
  paper's two choices.  Dice, the other, normalizes by batch statistics (a
  batch norm without scale) and so would need moving averages kept alike in
  three frameworks for a paper-reported gain of a few thousandths of AUC; the
  authors' released DIN code uses neither (sigmoid) in its attention.  PReLU
  is written as ``relu(x) - a * relu(-x)`` on the last axis in every framework,
  so it works on the attention's (batch, seq, units) tensors.
* Init is PyTorch's in all three: embeddings N(0, 1), dense weights and biases
  U(-1/sqrt(in), 1/sqrt(in)).  (Smaller embeddings, N(0, 0.1), leave the
  product features too small to learn from: the synthetic task's held-out AUC
  stayed at 0.5 for 60 steps, against 0.75 with N(0, 1).)

Layer names (canonical, ``models.weights``): ``item_embedding``,
``category_embedding``, ``attention.{0..}`` and ``mlp.{0..}`` (dense layers at
even indices, PReLUs at odd ones, the last dense alone), as PyTorch's
``nn.Sequential`` and MindSpore's ``SequentialCell`` number them.

Counts are analytic: trainable parameters (embeddings, dense layers, PReLU
slopes) and the multiply-adds of the dense layers (the attention MLP once per
behaviour position).  Element-wise work (the difference and product features,
PReLU, masking, the weighted sum) and the look-ups are left out, as the other
families leave out BN and ReLU.
"""

from __future__ import annotations

from collections.abc import Iterator

from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.din.torch:build",
    "tensorflow": "dlbench.models.din.keras:build",
    "mindspore": "dlbench.models.din.mindspore:build",
}
OBJECTIVE = "ctr"
PAD_ID = 0
PRELU_INIT = 0.25


def embed_dim(cfg: dict) -> int:
    return cfg["item_dim"] + cfg["category_dim"]


def walk(cfg: dict) -> Iterator[tuple]:
    """Network order: ("embedding", rows, dim), ("dense", positions, in, out),
    ("prelu", units)."""
    d, seq = embed_dim(cfg), cfg["seq_len"]
    yield ("embedding", cfg["items"], cfg["item_dim"])
    yield ("embedding", cfg["categories"], cfg["category_dim"])
    width = 4 * d
    for units in cfg["attention_units"]:
        yield ("dense", seq, width, units)
        yield ("prelu", units)
        width = units
    yield ("dense", seq, width, 1)
    width = 2 * d
    for units in cfg["mlp_units"]:
        yield ("dense", 1, width, units)
        yield ("prelu", units)
        width = units
    yield ("dense", 1, width, cfg["num_classes"])


def count_parameters(cfg: dict) -> int:
    total = 0
    for op in walk(cfg):
        if op[0] == "embedding":
            total += op[1] * op[2]
        elif op[0] == "dense":
            total += op[2] * op[3] + op[3]
        else:
            total += op[1]
    return total


def count_macs(cfg: dict) -> int:
    return sum(op[1] * op[2] * op[3] for op in walk(cfg) if op[0] == "dense")


def parameter_count(spec: ModelSpec) -> int:
    return count_parameters(spec.config)


def multiply_adds(spec: ModelSpec) -> int:
    return count_macs(spec.config)


def _din(
    name: str,
    display: str,
    *,
    items: int,
    categories: int,
    item_dim: int,
    category_dim: int,
    seq_len: int,
    attention: tuple[int, ...],
    mlp: tuple[int, ...],
    batch: int,
    dataset: str,
    learning_rate: float,
) -> ModelSpec:
    cfg = {
        "items": items,
        "categories": categories,
        "item_dim": item_dim,
        "category_dim": category_dim,
        "seq_len": seq_len,
        "attention_units": tuple(attention),
        "mlp_units": tuple(mlp),
        "num_classes": 2,
        "learning_rate": learning_rate,
    }
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="din",
            task="ctr-prediction",
            network_type="Attention",
            dataset=dataset,
            inputs=(
                InputSpec("hist_items", (seq_len,), "int32", (0, items)),
                InputSpec("hist_cats", (seq_len,), "int32", (0, categories)),
                InputSpec("item", (1,), "int32", (1, items)),
                InputSpec("category", (1,), "int32", (1, categories)),
            ),
            num_classes=2,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config=cfg,
            macs_fn=multiply_adds,
            params_fn=parameter_count,
            objective=OBJECTIVE,
            # Integer-id inputs and dense layers: static QDQ would calibrate on random
            # ids; dynamic INT8 quantizes the weights.  The held-out AUC runs by default.
            run=RunDefaults(int8_mode="dynamic", batch_sizes=(1, 32, 256), eval=True),
        )
    )


# SGD (momentum 0.9) at the CNNs' 0.05: din-mini's held-out AUC on the synthetic
# task passes 0.7 within 30 steps; at 0.1 and above it climbs faster but then
# collapses to a constant (din at 0.1 within 40 steps).
LEARNING_RATE = 0.05

DIN = _din(
    "din",
    "DIN (Amazon Electronics: emb 18+18, seq 100, att 80-40, MLP 200-80-2)",
    items=63_001,
    categories=801,
    item_dim=18,
    category_dim=18,
    seq_len=100,
    attention=(80, 40),
    mlp=(200, 80),
    batch=32,
    dataset="amazon-electronics",
    learning_rate=LEARNING_RATE,
)
# Same topology, small enough for tests and quick demos.
_din(
    "din-mini",
    "DIN (mini: emb 8+8, seq 20, att 16-8, MLP 32-16-2)",
    items=512,
    categories=16,
    item_dim=8,
    category_dim=8,
    seq_len=20,
    attention=(16, 8),
    mlp=(32, 16),
    batch=32,
    dataset="synthetic",
    learning_rate=LEARNING_RATE,
)


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every canonical weight name and shape (``models.weights``), independently of any
    framework: tests/models/test_models.py holds each builder to it."""
    shapes: dict[str, tuple[int, ...]] = {
        "item_embedding.weight": (cfg["items"], cfg["item_dim"]),
        "category_embedding.weight": (cfg["categories"], cfg["category_dim"]),
    }
    d = embed_dim(cfg)
    for prefix, width, hidden, out in (
        ("attention", 4 * d, cfg["attention_units"], 1),
        ("mlp", 2 * d, cfg["mlp_units"], cfg["num_classes"]),
    ):
        index = 0
        for units in (*hidden, out):
            shapes[f"{prefix}.{index}.weight"] = (units, width)
            shapes[f"{prefix}.{index}.bias"] = (units,)
            if index // 2 < len(hidden):
                shapes[f"{prefix}.{index + 1}.weight"] = (units,)
            index, width = index + 2, units
    return shapes
