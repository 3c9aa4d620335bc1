"""GNMT-style neural machine translation (Wu et al. 2016, "Google's Neural Machine
Translation System"), in the configuration of MLPerf's / NVIDIA's GNMT v2, written
once per framework in this folder.

What is implemented, the same in all three frameworks:

* **Encoder**, 4 LSTM layers of ``hidden`` units: layer 0 bidirectional over the
  embeddings (its two directions concatenated, 2·hidden), layer 1 unidirectional
  (2·hidden -> hidden), layers 2 and 3 unidirectional with a residual connection
  around each (GNMT's "residual connections from layer 3", counting from 1).
* **Decoder**, 4 LSTM layers: layer 0 runs over the embedded target-input ids
  and is the attention's query; its output and the attention context (2·hidden)
  feed layer 1; layers 2 and 3 take their input concatenated with the same
  context, with residual connections; a ``vocab`` dense classifier on top.  As
  in GNMT v2 (not the 2016 paper's input feeding), the context of step t is
  computed from decoder layer 0's output at t, so teacher-forced training runs
  every layer over the whole sequence at once; the decoder starts from zero states.
* **Attention: Bahdanau (additive)**, score(q, k) = v · tanh(W_q q + b + W_k k)
  over the encoder's top outputs, softmax over source positions whose id is
  not padding (masked with ``MASK_VALUE``), context = weights · encoder
  outputs.  GNMT v2's *normalized* Bahdanau also rescales v to g·v/|v| (one
  more scalar, g); that rescaling is not implemented here, its bias is b.
* **Vocabulary 32,000 shared** by source and target, and one embedding table
  (hidden wide) for both, as GNMT v2's ``share_embedding``.  Ids: 0 padding,
  1 unknown, 2 beginning of sentence, 3 end of sentence.
* **LSTM conventions of ``models.lstm``**: gate order i, f, g, o; one trainable
  bias per gate set (PyTorch's and MindSpore's ``b_hh`` zero and frozen, Keras'
  single bias).  Init is GNMT v2's: every weight U(-0.1, 0.1), ``b_hh`` 0.
* **Not implemented**: dropout (0.2 in GNMT v2; the zoo's recurrent models train
  without it), packed (length-sorted) source sequences: the encoder also runs
  over padding, which attention then masks; beam search, length normalization.

Two decoders, two registered models per size:

* ``gnmt``, ``gnmt-mini``: teacher forced.  Inputs ``src`` and ``tgt_in``
  (int32 ids), output logits (batch, tgt_len, vocab).  Training (objective
  ``seq2seq``), export, verification and the default inference benchmark.
* ``gnmt-greedy``, ``gnmt-mini-greedy``: greedy decoding of ``decode_len``
  steps from the beginning-of-sentence id, each step's arg-max fed back as the
  next input; input ``src``, output the logits of every step (batch,
  decode_len, vocab).  The loop is unrolled (a fixed maximum length, no early
  stop at end of sentence), so every framework's graph and the ONNX file are
  a straight chain of steps.  Same weights and names as the teacher-forced
  model, so a teacher-forced checkpoint loads into it as it is
  (``dlbench export CKPT --model gnmt-mini-greedy``).

Counts are analytic: trainable parameters, and multiply-adds of every matrix
product (LSTM 4·hidden·(input + hidden) per step and direction, the dense
layers per position, attention's score products and its context product);
gate nonlinearities, tanh, softmax and residual additions are left out.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.gnmt.torch:build",
    "tensorflow": "dlbench.models.gnmt.keras:build",
    "mindspore": "dlbench.models.gnmt.mindspore:build",
}
OBJECTIVE = "seq2seq"
DECODERS = ("teacher", "greedy")
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
INIT_RANGE = 0.1
# Additive score of a padded source position: exp() underflows to 0 in float32 and
# the value still fits float16 (an FP16 build keeps it finite).
MASK_VALUE = -10000.0
ENCODER_LAYERS = ("encoder.0", "encoder.1", "encoder.2", "encoder.3")


def check_decoder(decoder: str) -> str:
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {', '.join(DECODERS)}, not {decoder!r}")
    return decoder


def target_steps(cfg: dict) -> int:
    """Decoder steps: the teacher-forced target length, or the greedy decode length."""
    return cfg["decode_len"] if check_decoder(cfg["decoder"]) == "greedy" else cfg["tgt_len"]


def output_shape(cfg: dict) -> tuple[int, int]:
    """Logits per sample: (decoder steps, vocabulary), not a classifier's (classes,)."""
    return (target_steps(cfg), cfg["vocab_size"])


def walk(cfg: dict) -> Iterator[tuple]:
    """Network order, as ("embedding", rows, dim) / ("lstm", name, cin, hidden, steps)
    (one per direction) / ("dense", name, positions, in, out, bias) / ("matmul", name, macs)."""
    v, h, layers = cfg["vocab_size"], cfg["hidden"], cfg["layers"]
    s, t = cfg["src_len"], target_steps(cfg)
    yield ("embedding", v, h)
    yield ("lstm", "encoder.0", h, h, s)
    yield ("lstm", "encoder.0.reverse", h, h, s)
    for k in range(1, layers):
        yield ("lstm", f"encoder.{k}", 2 * h if k == 1 else h, h, s)
    yield ("lstm", "decoder.0", h, h, t)
    yield ("dense", "attention.query", t, h, h, True)
    yield ("dense", "attention.key", s, h, h, False)
    yield ("dense", "attention.score", t * s, h, 1, False)
    yield ("matmul", "attention.context", t * s * h)
    for k in range(1, layers):
        yield ("lstm", f"decoder.{k}", 2 * h, h, t)
    yield ("dense", "classifier", t, h, v, True)


def count_parameters(cfg: dict) -> int:
    total = 0
    for op in walk(cfg):
        if op[0] == "embedding":
            total += op[1] * op[2]
        elif op[0] == "lstm":
            total += 4 * op[3] * (op[2] + op[3]) + 4 * op[3]  # one trainable bias
        elif op[0] == "dense":
            total += op[3] * op[4] + (op[4] if op[5] else 0)
    return total


def count_macs(cfg: dict) -> int:
    total = 0
    for op in walk(cfg):
        if op[0] == "lstm":
            total += op[4] * 4 * op[3] * (op[2] + op[3])
        elif op[0] == "dense":
            total += op[2] * op[3] * op[4]
        elif op[0] == "matmul":
            total += op[2]
    return total


def example_inputs(cfg: dict, batch: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(src, tgt_in) int32 for the teacher-forced network, (src,) for the greedy one, with
    a padded source tail of a different length per row (row 0 unpadded): tests that compare
    frameworks need inputs that exercise the attention's mask."""
    rng = np.random.default_rng(seed)
    s, t = cfg["src_len"], cfg["tgt_len"]
    src = rng.integers(BOS_ID + 2, cfg["vocab_size"], (batch, s))
    lengths = rng.integers(max(1, s // 2), s + 1, (batch, 1))
    lengths[0] = s
    src = np.where(np.arange(s)[None] < lengths, src, PAD_ID).astype(np.int32)
    if cfg["decoder"] == "greedy":
        return (src,)
    tgt_in = rng.integers(BOS_ID + 2, cfg["vocab_size"], (batch, t)).astype(np.int32)
    tgt_in[:, 0] = BOS_ID
    return src, tgt_in


def parameter_count(spec: ModelSpec) -> int:
    return count_parameters(spec.config)


def multiply_adds(spec: ModelSpec) -> int:
    return count_macs(spec.config)


# SGD with momentum 0.9 (as every zoo model trains): at the CNNs' 0.05 the loss of the
# synthetic task falls slowly; 0.5 shows it falling within a few steps (as models.lstm).
LEARNING_RATE = 0.5


def _gnmt(
    name: str,
    display: str,
    *,
    vocab: int,
    hidden: int,
    src_len: int,
    tgt_len: int,
    batch: int,
    dataset: str,
    decoder: str = "teacher",
    lr: float = LEARNING_RATE,
    run: RunDefaults | None = None,
) -> ModelSpec:
    cfg = {
        "vocab_size": vocab,
        "hidden": hidden,
        "layers": 4,
        "src_len": src_len,
        "tgt_len": tgt_len,
        "decode_len": tgt_len,
        "decoder": decoder,
        "learning_rate": lr,
    }
    inputs = [InputSpec("src", (src_len,), "int32", (0, vocab))]
    if decoder == "teacher":
        inputs.append(InputSpec("tgt_in", (tgt_len,), "int32", (0, vocab)))
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="gnmt",
            task="translation",
            network_type="RNN",
            dataset=dataset,
            inputs=tuple(inputs),
            num_classes=vocab,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config=cfg,
            macs_fn=multiply_adds,
            params_fn=parameter_count,
            objective=OBJECTIVE,
            # Token inputs and a recurrence: weights-only INT8 (see RunDefaults.int8_mode).
            run=run or RunDefaults(int8_mode="dynamic", batch_sizes=(1, 8, 32)),
        )
    )


# MLPerf's GNMT v2 trains WMT16 English-German at batch 128 with sentences of up to 50
# tokens; 50 source and 50 target positions here.
GNMT = _gnmt(
    "gnmt",
    "GNMT v2 (4+4 LSTM 1024, Bahdanau attention, vocab 32k)",
    vocab=32_000,
    hidden=1024,
    src_len=50,
    tgt_len=50,
    batch=128,
    dataset="wmt16-en-de",
)
GNMT_GREEDY = _gnmt(
    "gnmt-greedy",
    "GNMT v2, greedy decoding (50 steps)",
    vocab=32_000,
    hidden=1024,
    src_len=50,
    tgt_len=50,
    batch=128,
    dataset="wmt16-en-de",
    decoder="greedy",
)
# Same topology, small enough for tests and quick demos.
GNMT_MINI = _gnmt(
    "gnmt-mini",
    "GNMT mini (4+4 LSTM 32, vocab 64)",
    vocab=64,
    hidden=32,
    src_len=12,
    tgt_len=12,
    batch=16,
    dataset="synthetic",
)
GNMT_MINI_GREEDY = _gnmt(
    "gnmt-mini-greedy",
    "GNMT mini, greedy decoding (12 steps)",
    vocab=64,
    hidden=32,
    src_len=12,
    tgt_len=12,
    batch=16,
    dataset="synthetic",
    decoder="greedy",
)
