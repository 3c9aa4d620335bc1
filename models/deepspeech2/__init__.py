"""DeepSpeech2 (conv front end, bidirectional LSTMs, CTC over characters), once per framework.

Amodei et al., "Deep Speech 2: End-to-End Speech Recognition in English and
Mandarin", ICML 2016, in the configuration of the MLPerf speech reference
(deepspeech.pytorch): a log spectrogram of 161 bins (20 ms Hamming windows
every 10 ms at 16 kHz, ``harness.data.librispeech``) goes through two 2-D
convolutions, each followed by batch norm and a hardtanh clipped to [0, 20]:

* ``conv1``: 32 filters of 41x11 (frequency x time), stride 2x2, padding 20x5;
* ``conv2``: 32 filters of 21x11, stride 2x1, padding 10x5;

so 161 bins become 41 and T frames become ceil(T/2) (``output_frames``).  The
32x41 features of each frame feed **5 bidirectional LSTM layers of 800**
(the MLPerf reference's depth and width), whose two directions are *summed*
(deepspeech.pytorch's ``BatchRNN``), then one linear layer per frame to the
**29 characters** (``ALPHABET``: CTC blank, space, apostrophe, a-z).  The
model ``deepspeech2`` takes 500 frames (5 s of audio) per utterance;
``deepspeech2-mini`` the same 161 bins, 64 frames, 8 filters and 2 layers of 32.

Choices, and why:

* **LSTM, not GRU.**  The MLPerf reference trains GRUs, deepspeech.pytorch
  defaults to LSTMs; the paper tries both.  LSTM reuses the zoo's exact
  conventions (``models.lstm``): gate order i, f, g, o in all three
  frameworks, one trainable bias per gate set (PyTorch's and MindSpore's
  ``b_hh`` frozen at zero, Keras' single bias = ``b_ih + b_hh``), weight rules
  that already exist, MindSpore's ONNX export of ``nn.LSTM`` and ORT's dynamic
  INT8 of the LSTM op.  A GRU cannot be made identical that cheaply: PyTorch's
  candidate gate applies the reset gate *after* the recurrent product with its
  own ``b_hn`` (Keras ``reset_after=True`` matches, the Keras 2 default
  ``reset_after=False`` does not), so b_hh could not be folded away, and gate
  order differs (PyTorch r, z, n; Keras z, r, h).
* **No convolution biases**: batch norm follows each convolution and cancels
  them.  **No batch norm between LSTM layers** and none before the output
  layer (deepspeech.pytorch has sequence-wise BN there): the paper's
  sequence-wise BN is a training aid whose statistics would have to be masked
  per utterance; the brief's network has BN in the conv stack, where it is kept.
* **No masking of padded frames** (deepspeech.pytorch's ``MaskConv``): frames
  past an utterance's end are computed as data, as the zoo's LSTM computes
  padding tokens; CTC reads only each utterance's ``output_frames``.
* The inference graph ends at per-frame character logits (batch, frames/2,
  29); CTC decoding (greedy: best class per frame, merge repeats, drop blanks)
  runs outside the graph, on the host (``models.deepspeech2.ctc``).
* Initialization is PyTorch's default everywhere: conv and linear
  U(-1/sqrt(fan_in), 1/sqrt(fan_in)), LSTM U(-1/sqrt(hidden), 1/sqrt(hidden)),
  BN at the identity.
* Training minimizes CTC (objective ``ctc``): mean negative log-likelihood
  per utterance, labels = (padded transcripts, transcript lengths, output
  frames after the conv strides).  The held-out score is greedy decoding's
  character error rate (``harness.evaluate.scoring``).
* ``dlbench run`` quantizes to INT8 dynamically, as for the zoo's LSTM.

Counts are analytic: trainable parameters (the frozen ``b_hh`` excluded);
multiply-adds of the convolutions, of the LSTM matrix products
(4·hidden·(input + hidden) per frame, layer and direction) and of the output
layer at every frame; BN, clipping, gate nonlinearities and the direction sum
are left out, as the other families leave out element-wise work.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.deepspeech2.torch:build",
    "tensorflow": "dlbench.models.deepspeech2.keras:build",
    "mindspore": "dlbench.models.deepspeech2.mindspore:build",
}
# Index 0 is CTC's blank; the transcript characters follow.
ALPHABET = "_ '" + "abcdefghijklmnopqrstuvwxyz"
BLANK = 0
# (kernel (freq, time), stride (freq, time), padding (freq, time)) of the two convolutions.
CONVS = (((41, 11), (2, 2), (20, 5)), ((21, 11), (2, 1), (10, 5)))
HARDTANH_MAX = 20.0
BN_EPS = 1e-5


def _out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def conv_sizes(cfg: dict) -> list[tuple[int, int]]:
    """(bins, frames) after each convolution."""
    f, t, out = cfg["bins"], cfg["frames"], []
    for (kf, kt), (sf, st), (pf, pt) in CONVS:
        f, t = _out(f, kf, sf, pf), _out(t, kt, st, pt)
        out.append((f, t))
    return out


def output_frames(cfg: dict, frames):
    """Frames the LSTMs (and CTC) see for ``frames`` input frames (an int or an int array):
    each convolution maps n to (n + 2·pad - kernel) // stride + 1, i.e. ceil(n / 2) here."""
    for (_, kt), (_, st), (_, pt) in CONVS:
        frames = (frames + 2 * pt - kt) // st + 1
    return frames


def output_shape(cfg: dict) -> tuple[int, int]:
    """Logits per utterance: (frames after the convolutions, characters), per frame."""
    return (output_frames(cfg, cfg["frames"]), cfg["num_classes"])


def walk(cfg: dict):
    """Yield ("conv", cin, cout, (kf, kt), (out_f, out_t)), ("bn", c), ("lstm", layer,
    direction, input, hidden, steps) and ("fc", in, out, positions) in network order."""
    cin = 1
    for ((kf, kt), _, _), (f, t) in zip(CONVS, conv_sizes(cfg)):
        yield ("conv", cin, cfg["channels"], (kf, kt), (f, t))
        yield ("bn", cfg["channels"])
        cin = cfg["channels"]
    f, steps = conv_sizes(cfg)[-1]
    width = cfg["channels"] * f
    for layer in range(cfg["num_layers"]):
        for direction in range(2):
            yield ("lstm", layer, direction, width, cfg["hidden_size"], steps)
        width = cfg["hidden_size"]  # directions are summed
    yield ("fc", width, cfg["num_classes"], steps)


def parameter_count(spec: ModelSpec) -> int:
    total = 0
    for op in walk(spec.config):
        if op[0] == "conv":
            total += op[1] * op[2] * op[3][0] * op[3][1]
        elif op[0] == "bn":
            total += 2 * op[1]
        elif op[0] == "lstm":
            _, _, _, cin, hidden, _ = op
            total += walkcount.lstm_parameters(cin, hidden)
        else:
            total += op[1] * op[2] + op[2]
    return total


def multiply_adds(spec: ModelSpec) -> int:
    total = 0
    for op in walk(spec.config):
        if op[0] == "conv":
            _, cin, cout, (kf, kt), (f, t) = op
            total += f * t * kf * kt * cin * cout
        elif op[0] == "lstm":
            _, _, _, cin, hidden, steps = op
            total += walkcount.lstm_multiply_adds(cin, hidden, steps)
        elif op[0] == "fc":
            total += op[1] * op[2] * op[3]
    return total


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder must export."""
    shapes: dict[str, tuple[int, ...]] = {}
    cin, c = 1, cfg["channels"]
    for i, ((kf, kt), _, _) in enumerate(CONVS, start=1):
        shapes[f"conv{i}.weight"] = (c, cin, kf, kt)
        for suffix in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"bn{i}.{suffix}"] = (c,)
        cin = c
    width, hidden = c * conv_sizes(cfg)[-1][0], cfg["hidden_size"]
    for layer in range(cfg["num_layers"]):
        for tail in ("_l0", "_l0_reverse"):
            shapes[f"rnn.{layer}.weight_ih{tail}"] = (4 * hidden, width)
            shapes[f"rnn.{layer}.weight_hh{tail}"] = (4 * hidden, hidden)
            shapes[f"rnn.{layer}.bias_ih{tail}"] = (4 * hidden,)
            shapes[f"rnn.{layer}.bias_hh{tail}"] = (4 * hidden,)
        width = hidden
    shapes["fc.weight"] = (cfg["num_classes"], hidden)
    shapes["fc.bias"] = (cfg["num_classes"],)
    return shapes


# SGD with momentum 0.9 on the mean CTC loss per utterance (a sum over frames, tens
# to hundreds of nats): the CNNs' 0.05 diverges; at this rate the synthetic loss
# falls within a few steps in all three frameworks.
LEARNING_RATE = 0.01


def _deepspeech2(
    name: str,
    display: str,
    *,
    bins: int,
    frames: int,
    channels: int,
    hidden: int,
    layers: int,
    max_chars: int,
    batch: int,
    dataset: str,
    learning_rate: float = LEARNING_RATE,
) -> ModelSpec:
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="deepspeech2",
            task="speech-recognition",
            network_type="RNN",
            dataset=dataset,
            # A one-channel "image" (bins x frames): the zoo's NCHW convention, NHWC in Keras.
            inputs=(InputSpec("input", (1, bins, frames)),),
            num_classes=len(ALPHABET),
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config={
                "bins": bins,
                "frames": frames,
                "channels": channels,
                "hidden_size": hidden,
                "num_layers": layers,
                "num_classes": len(ALPHABET),
                "max_transcript": max_chars,
                "learning_rate": learning_rate,
            },
            objective="ctc",
            run=RunDefaults(int8_mode="dynamic", batch_sizes=(1, 8, 16)),
            macs_fn=multiply_adds,
            params_fn=parameter_count,
        )
    )


DEEPSPEECH2 = _deepspeech2(
    "deepspeech2",
    "DeepSpeech2 (2 conv + 5x bi-LSTM 800, 161 bins x 500 frames, CTC)",
    bins=161,
    frames=500,
    channels=32,
    hidden=800,
    layers=5,
    max_chars=100,
    batch=16,
    dataset="LibriSpeech",
)
# Same topology and input bins (the real-data reader's spectrogram), small enough for tests.
_deepspeech2(
    "deepspeech2-mini",
    "DeepSpeech2 (mini: 2 conv x8 + 2x bi-LSTM 32, 64 frames)",
    bins=161,
    frames=64,
    channels=8,
    hidden=32,
    layers=2,
    max_chars=12,
    batch=8,
    dataset="synthetic",
    learning_rate=0.03,
)
