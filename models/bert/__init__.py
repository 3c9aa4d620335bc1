"""BERT (post-LN encoder, Devlin et al. 2018), written once per framework in this folder.

The seeds measure BERT-Large pre-training (24 layers, sequence length 128,
Chinese-Wikipedia vocabulary of 21,128 tokens, batch 96 per Ascend 910), and
the PyTorch-vs-MindSpore paper BERT at batch 8x256: both need the same network
in every framework, so it is described here by plain numbers and each
framework's parameter and multiply-add counts are checked against this walk.

One builder per framework makes two networks from one encoder:

* ``head="classification"`` (default): encoder + pooler (dense + tanh on the
  first token) + a ``num_classes`` dense on the pooled output; one output,
  ``logits`` (batch, num_classes).  Export, verification and inference
  benchmarks use this network.
* ``head="pretraining"``: encoder + pooler + the masked-LM head (dense, exact
  GELU, LayerNorm, then a decoder whose weight IS the word-embedding table, plus
  its own bias) + the next-sentence head (2-way dense on the pooled output);
  outputs ``(mlm_logits (batch, seq, vocab), nsp_logits (batch, 2))``.
  The MLM decoder runs over every position (as Hugging Face's does), not only
  the masked ones, so its cost is part of the MACs below.

Same math everywhere: embeddings (word + position + token type) -> LayerNorm
(eps 1e-12) -> dropout; per layer, self-attention with separate query/key/value
dense layers, scores scaled by 1/sqrt(head size) plus the additive mask
``(1 - attention_mask) * -10000``, softmax, dropout, context, output dense,
dropout, residual + LayerNorm; then the feed-forward dense, exact (erf) GELU,
dense, dropout, residual + LayerNorm.  Dropout (``dropout``, 0.1) acts in
training only; every framework's eval mode is deterministic.  Weights start
from BERT's init (normal, std 0.02; zero biases; LayerNorm ones/zeros).

Inputs, in call order: ``input_ids`` (int32, [0, vocab)), ``token_type_ids``
(int32, {0, 1}), ``attention_mask`` (int32, 1 = attend).  The sequence length
is ``shape[0]``; positions beyond it are never used, but ``max_position``
embeddings exist (and count) as in the published models.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.bert.torch:build",
    "tensorflow": "dlbench.models.bert.keras:build",
    "mindspore": "dlbench.models.bert.mindspore:build",
}
HEADS = ("classification", "pretraining")
LAYER_NORM_EPS = 1e-12
INIT_STD = 0.02
# The additive attention-mask value of Google's and Hugging Face's BERT: far
# enough below any score that exp() of a masked position is 0 in float32.
MASK_VALUE = -10000.0
IGNORE_INDEX = -100  # MLM label of a position that is not predicted
OBJECTIVE = "bert-pretraining"


def check_head(head: str) -> str:
    if head not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEADS)}, not {head!r}")
    return head


def config_with(spec: ModelSpec, overrides: dict) -> dict:
    """``spec.config`` with ``overrides`` applied; unknown keys are an error."""
    cfg = spec.config_with(overrides)
    if cfg["hidden"] % cfg["heads"]:
        raise ValueError(f"hidden {cfg['hidden']} is not a multiple of heads {cfg['heads']}")
    if cfg["seq_len"] > cfg["max_position"]:
        raise ValueError(f"seq_len {cfg['seq_len']} exceeds max_position {cfg['max_position']}")
    return cfg


def walk(cfg: dict, head: str = "classification") -> Iterator[tuple]:
    """Network order, as ("embedding", rows, dim) / ("layernorm", dim) /
    ("dense", positions, in, out) / ("matmul", macs) / ("bias", n).

    ``positions`` is how many times per sample a dense layer runs (every token,
    or only the first for the pooler and the heads); ``matmul`` is an attention
    product with no weights.  The tied MLM decoder is a ("matmul") against the
    word-embedding table plus its own ("bias", vocab).
    """
    check_head(head)
    seq, hidden, inter = cfg["seq_len"], cfg["hidden"], cfg["intermediate"]
    yield ("embedding", cfg["vocab_size"], hidden)
    yield ("embedding", cfg["max_position"], hidden)
    yield ("embedding", cfg["type_vocab_size"], hidden)
    yield ("layernorm", hidden)
    for _ in range(cfg["layers"]):
        for _qkv in range(3):
            yield ("dense", seq, hidden, hidden)
        yield ("matmul", seq * seq * hidden)  # scores: heads x (seq x head_size x seq)
        yield ("matmul", seq * seq * hidden)  # context: heads x (seq x seq x head_size)
        yield ("dense", seq, hidden, hidden)  # attention output
        yield ("layernorm", hidden)
        yield ("dense", seq, hidden, inter)
        yield ("dense", seq, inter, hidden)
        yield ("layernorm", hidden)
    yield ("dense", 1, hidden, hidden)  # pooler, first token only
    if head == "classification":
        yield ("dense", 1, hidden, cfg["num_classes"])
    else:
        yield ("dense", seq, hidden, hidden)  # MLM transform
        yield ("layernorm", hidden)
        yield ("matmul", seq * hidden * cfg["vocab_size"])  # decoder, tied to word embeddings
        yield ("bias", cfg["vocab_size"])
        yield ("dense", 1, hidden, 2)  # next-sentence prediction


def count_parameters(cfg: dict, head: str = "classification") -> int:
    total = 0
    for op in walk(cfg, head):
        kind = op[0]
        if kind == "embedding":
            total += op[1] * op[2]
        elif kind == "layernorm":
            total += 2 * op[1]
        elif kind == "dense":
            total += op[2] * op[3] + op[3]
        elif kind == "bias":
            total += op[1]
    return total


def count_macs(cfg: dict, head: str = "classification") -> int:
    """Multiply-adds of one sample: every dense layer and attention product.

    Embedding look-ups, LayerNorm, softmax, GELU, tanh, bias and residual
    additions are element-wise and left out, as published BERT FLOP figures do.
    """
    total = 0
    for op in walk(cfg, head):
        if op[0] == "dense":
            total += op[1] * op[2] * op[3]
        elif op[0] == "matmul":
            total += op[1]
    return total


def example_inputs(cfg: dict, batch: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(input_ids, token_type_ids, attention_mask) int32 (batch, seq_len) with real variety.

    Two segments per row and a padded tail of a different length per row, so
    that a network ignoring the token types or the mask computes something
    else: tests that compare frameworks need inputs that exercise both.
    """
    seq = cfg["seq_len"]
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg["vocab_size"], (batch, seq)).astype(np.int32)
    positions = np.arange(seq)[None]
    lengths = rng.integers(seq // 2, seq + 1, (batch, 1))
    lengths[0] = seq  # one row with no padding at all
    split = rng.integers(1, seq // 2, (batch, 1))
    types = ((positions >= split) & (positions < lengths)).astype(np.int32)
    mask = (positions < lengths).astype(np.int32)
    return ids, types, mask


def parameter_count(spec: ModelSpec) -> int:
    """Trainable parameters of the classification network (what is exported)."""
    return count_parameters(spec.config, "classification")


def multiply_adds(spec: ModelSpec) -> int:
    return count_macs(spec.config, "classification")


def _bert(
    name: str,
    display: str,
    *,
    layers: int,
    hidden: int,
    heads: int,
    intermediate: int,
    vocab: int,
    seq_len: int,
    max_position: int,
    batch: int,
    dataset: str,
    learning_rate: float = 0.05,
) -> ModelSpec:
    cfg = {
        "vocab_size": vocab,
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "intermediate": intermediate,
        "max_position": max_position,
        "type_vocab_size": 2,
        "seq_len": seq_len,
        "num_classes": 2,
        "dropout": 0.1,
        "learning_rate": learning_rate,
    }
    fields = dict(
        name=name,
        display_name=display,
        family="bert",
        task="language-modeling",
        network_type="Attention",
        dataset=dataset,
        inputs=(
            InputSpec("input_ids", (seq_len,), "int32", (0, vocab)),
            InputSpec("token_type_ids", (seq_len,), "int32", (0, 2)),
            InputSpec("attention_mask", (seq_len,), "int32", (0, 2)),
        ),
        num_classes=2,
        default_batch_size=batch,
        builders=dict(BUILDERS),
        config=cfg,
        macs_fn=multiply_adds,
        params_fn=parameter_count,
        objective=OBJECTIVE,
        # Token input: static QDQ would calibrate activations on random ids.
        run=RunDefaults(int8_mode="dynamic"),
    )
    return register_model(ModelSpec(**fields))


# Test-size network: trains in seconds on two cores in every framework.
BERT_TINY = _bert(
    "bert-tiny",
    "BERT-Tiny (2 layers, 128 hidden)",
    layers=2,
    hidden=128,
    heads=2,
    intermediate=512,
    vocab=1024,
    seq_len=64,
    max_position=64,
    batch=8,
    dataset="synthetic",
)
# SGD (momentum 0.9, as every zoo model trains) at 0.05 diverges on the full-size
# encoders within a few steps (bert-base: loss 10.8 -> 15-18 in 7 steps); at 0.01 it
# falls (10.8 -> 3.8).  BERT's usual AdamW with warm-up is not implemented.
BERT_BASE = _bert(
    "bert-base",
    "BERT-Base (Chinese vocabulary)",
    layers=12,
    hidden=768,
    heads=12,
    intermediate=3072,
    vocab=21128,
    seq_len=128,
    max_position=512,
    batch=32,
    dataset="zhwiki",
    learning_rate=0.01,
)
# The MindSpore benchmark page's BERT-Large: 24 layers, sequence 128, vocab 21128, batch 96.
BERT_LARGE = _bert(
    "bert-large",
    "BERT-Large (Chinese vocabulary)",
    layers=24,
    hidden=1024,
    heads=16,
    intermediate=4096,
    vocab=21128,
    seq_len=128,
    max_position=512,
    batch=96,
    dataset="zhwiki",
    learning_rate=0.01,
)


def reference_pretraining_loss(
    mlm_logits: np.ndarray, nsp_logits: np.ndarray, mlm_labels: np.ndarray, nsp_labels: np.ndarray
) -> float:
    """The pre-training objective in float64 numpy: what every framework's must equal.

    Mean masked-LM cross-entropy over the positions whose label is not -100,
    plus mean next-sentence cross-entropy.
    """

    def nll(logits, labels):
        logits = logits.astype(np.float64)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        return -logp[np.arange(len(labels)), labels]

    keep = mlm_labels.reshape(-1) != IGNORE_INDEX
    mlm = nll(mlm_logits.reshape(-1, mlm_logits.shape[-1])[keep], mlm_labels.reshape(-1)[keep])
    return float(mlm.mean() + nll(nsp_logits, nsp_labels.reshape(-1)).mean())


def classification_from_pretraining(framework: str, spec: ModelSpec, trained, seed: int = 0):
    """The classification network of ``spec`` carrying ``trained``'s encoder and pooler.

    ``dlbench train`` trains (and checkpoints) the pre-training network; export,
    verification and inference run the classification network.  They share the
    embeddings, every encoder layer and the pooler, which are copied through the
    canonical weights (``models.weights``); the MLM and NSP heads are dropped
    and the classifier keeps its seeded initialization (``seed``), as when
    fine-tuning starts.  The result is in eval mode.
    """
    from dlbench.models import weights

    tool = weights.module(framework)
    net = spec.build(framework, seed=seed)
    own = tool.export_weights(net)
    got = tool.export_weights(trained)
    shared = [k for k in own if k in got]
    if not any(k.startswith("encoder.") for k in shared):
        raise weights.WeightMismatch(
            f"{spec.name}: the trained {framework} network shares no "
            f"encoder weights with the classification network"
        )
    tool.import_weights(net, {k: got.get(k, v) for k, v in own.items()})
    if framework == "pytorch":
        net.eval()
    elif framework == "mindspore":
        net.set_train(False)
    return net
