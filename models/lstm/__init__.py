"""LSTM sentiment classifier (embedding -> stacked LSTM -> linear), once per framework.

The network of MindSpore's aclImdb sentiment tutorial (``SentimentNet``) and of
the PyTorch-vs-MindSpore paper: word embeddings of 300, a 2-layer
bidirectional LSTM with 100 hidden units, sequences of 500 tokens, batches of
64, two classes (positive, negative).  Choices made here, the same in all
three frameworks:

* **Vocabulary 20,000** (ids 0..19,999; 0 = padding, 1 = unknown for real
  data).  The tutorial uses GloVe's 400,000-word table, frozen; dlbench has
  no GloVe, so the table is smaller and trained: a frozen random table would
  measure nothing, and 20,000 words cover the aclImdb training reviews.
* **Classifier over the final hidden states of the top layer**: the forward
  direction's state after the last token concatenated with the backward
  direction's state after the first token (PyTorch's top ``h_n``, Keras
  ``Bidirectional(LSTM(return_sequences=False))``), then one linear layer to
  the classes.  (The tutorial concatenates the outputs at both ends, 4 x
  hidden; this is the usual, smaller head.)  No masking: padding ids are
  ordinary tokens, as in the tutorial.
* **One bias per gate set.**  Keras' LSTM has one bias vector, PyTorch's and
  MindSpore's have two (``b_ih`` and ``b_hh``) that only ever appear summed.
  PyTorch and MindSpore keep ``b_hh`` at zero and frozen (not trainable), so
  the three networks have the same trainable parameters and compute the
  same function; weight transfer folds ``b_ih + b_hh`` into Keras' bias.
* The stack is one single-layer LSTM per depth, named ``lstm.{depth}`` in
  every framework (PyTorch ``nn.ModuleList`` of ``nn.LSTM``, Keras layers
  named ``lstm.0``, MindSpore ``nn.CellList``): the same function as one
  two-layer LSTM without dropout, and weight transfer matches layers by name.
* Gate order is i, f, g(c), o in all three (PyTorch's documented order,
  Keras' kernel layout, MindSpore's ``_lstm_cell`` and CPU ``LSTM`` op).
* Initialization is PyTorch's everywhere: embedding N(0, 1), LSTM weights and
  biases U(-1/sqrt(hidden), 1/sqrt(hidden)), linear U(-1/sqrt(in), 1/sqrt(in)).
* Token ids are int32 (``InputSpec.int_range`` = (0, vocabulary)).
* ``dlbench run`` quantizes to INT8 dynamically (``RunDefaults.int8_mode``): static
  QDQ of MindSpore's opset-11 LSTM export cannot be built, and calibrating
  activations of a recurrence on random ids says little.

Counts are analytic: trainable parameters, and multiply-adds of the matrix
products (4·hidden·(input + hidden) per time step, layer and direction, plus
the classifier).  Gate nonlinearities and element-wise products are left
out, as the ResNet count leaves out BN and ReLU; the embedding is a lookup.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.lstm.torch:build",
    "tensorflow": "dlbench.models.lstm.keras:build",
    "mindspore": "dlbench.models.lstm.mindspore:build",
}


def directions(cfg: dict) -> int:
    return 2 if cfg["bidirectional"] else 1


def walk(cfg: dict):
    """Yield ("embedding", rows, dim), ("lstm", layer, direction, input, hidden, steps),
    ("fc", in, out) in network order."""
    yield ("embedding", cfg["vocab_size"], cfg["embedding_dim"])
    width = cfg["embedding_dim"]
    for layer in range(cfg["num_layers"]):
        for direction in range(directions(cfg)):
            yield ("lstm", layer, direction, width, cfg["hidden_size"], cfg["seq_len"])
        width = cfg["hidden_size"] * directions(cfg)
    yield ("fc", width, cfg["num_classes"])


def parameter_count(spec: ModelSpec) -> int:
    total = 0
    for op in walk(spec.config):
        if op[0] == "embedding":
            total += op[1] * op[2]
        elif op[0] == "lstm":
            _, _, _, cin, hidden, _ = op
            total += walkcount.lstm_parameters(cin, hidden)
        else:
            total += op[1] * op[2] + op[2]
    return total


def multiply_adds(spec: ModelSpec) -> int:
    total = 0
    for op in walk(spec.config):
        if op[0] == "lstm":
            _, _, _, cin, hidden, steps = op
            total += walkcount.lstm_multiply_adds(cin, hidden, steps)
        elif op[0] == "fc":
            total += op[1] * op[2]
    return total


# SGD (momentum 0.9) at the CNNs' 0.05 leaves the loss flat at ln 2 for tens of
# steps: the gradient reaching the embeddings through the gates is small.  At 0.5
# the synthetic task's loss falls within a few steps in all three frameworks.
LEARNING_RATE = 0.5


def _lstm(
    name: str,
    display: str,
    *,
    vocab: int,
    embedding: int,
    hidden: int,
    layers: int,
    bidirectional: bool,
    seq_len: int,
    batch: int,
    dataset: str,
) -> ModelSpec:
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="lstm",
            task="text-classification",
            network_type="RNN",
            dataset=dataset,
            inputs=(InputSpec("input", (seq_len,), "int32", int_range=(0, vocab)),),
            num_classes=2,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config={
                "vocab_size": vocab,
                "embedding_dim": embedding,
                "hidden_size": hidden,
                "num_layers": layers,
                "bidirectional": bidirectional,
                "seq_len": seq_len,
                "num_classes": 2,
                "learning_rate": LEARNING_RATE,
            },
            run=RunDefaults(int8_mode="dynamic", batch_sizes=(1, 8, 64)),
            macs_fn=multiply_adds,
            params_fn=parameter_count,
        )
    )


LSTM = _lstm(
    "lstm",
    "LSTM sentiment (2x bi-LSTM 100, emb 300, seq 500)",
    vocab=20_000,
    embedding=300,
    hidden=100,
    layers=2,
    bidirectional=True,
    seq_len=500,
    batch=64,
    dataset="aclImdb",
)
# Same topology, small enough for tests and quick demos.
_lstm(
    "lstm-tiny",
    "LSTM sentiment (tiny: 2x bi-LSTM 16, emb 16, seq 32)",
    vocab=256,
    embedding=16,
    hidden=16,
    layers=2,
    bidirectional=True,
    seq_len=32,
    batch=8,
    dataset="synthetic",
)
