"""DeepSpeech2 in MindSpore (see ``models.deepspeech2`` for the configuration and choices).

Cell paths are PyTorch's module paths (``conv1``, ``bn1``, ``rnn.0``, ``fc``),
so parameters carry the canonical names; ``bias_hh_*`` is zero and frozen, as
in PyTorch.  As in ``models.lstm``'s MindSpore network, the LSTMs' zero initial
state is derived from the input (``nn.LSTM`` would bake the traced batch into
an exported constant), and the frame features are flattened by a reshape whose
batch is -1, and the output layer is a MatMul on the (batch, frames, hidden)
sequence (``nn.Dense`` reshapes 3-D input to 2-D and back to the traced batch),
so the exported graph takes any batch.  The hardtanh is
``minimum(relu(x), 20)``, which MindSpore's ONNX exporter writes as Relu and Min.
Each convolution's padding is an explicit ``ops.Pad`` before a ``valid`` conv:
the exporter writes ``Conv2d(pad_mode="pad")``'s unequal (20, 5) padding into
ONNX's ``pads`` in the wrong order (measured: 161x64 in, 45x34 out of conv2
instead of 32x41), while a Pad it writes correctly.
CTC is ``ops.ctc_loss`` (CTCLossV2), which runs on CPU in graph mode.
"""

from __future__ import annotations

import math
import os
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import Uniform, initializer

from dlbench.models.deepspeech2 import BLANK, BN_EPS, CONVS, HARDTANH_MAX, conv_sizes
from dlbench.models.registry import ModelSpec

# MindSpore's moving average keeps `momentum` of the old value: PyTorch's 0.1.
BN_MOMENTUM = 0.9


class FrameDense(nn.Dense):
    """``nn.Dense`` (same parameters, same names) applied at every frame as one MatMul:
    ``nn.Dense`` reshapes 3-D input to 2-D and back to the traced batch."""

    def construct(self, x):
        return ops.matmul(x, self.weight.T) + self.bias


class DeepSpeech2(nn.Cell):
    def __init__(self, cfg: dict):
        super().__init__()
        c, hidden = cfg["channels"], cfg["hidden_size"]
        convs, pads, cin = [], [], 1
        for kernel, stride, pad in CONVS:
            bound = 1 / math.sqrt(cin * kernel[0] * kernel[1])
            convs.append(
                nn.Conv2d(
                    cin,
                    c,
                    kernel,
                    stride=stride,
                    pad_mode="valid",
                    has_bias=False,
                    weight_init=Uniform(bound),
                )
            )
            pads.append(ops.Pad(((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1]))))
            cin = c
        self.conv1, self.conv2 = convs
        self.pad1, self.pad2 = pads
        self.bn1 = nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.bn2 = nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.bins, self.frames = conv_sizes(cfg)[-1]
        self.channels, self.hidden = c, hidden
        width = c * self.bins
        self.rnn = nn.CellList(
            [
                nn.LSTM(
                    width if layer == 0 else hidden,
                    hidden,
                    1,
                    has_bias=True,
                    batch_first=True,
                    bidirectional=True,
                )
                for layer in range(cfg["num_layers"])
            ]
        )
        # nn.LSTM draws from numpy's global generator; redraw so ms.set_seed governs it.
        stdv = 1 / math.sqrt(hidden)
        for lstm in self.rnn:
            for param in (*lstm.w_ih_list, *lstm.w_hh_list, *lstm.b_ih_list):
                param.set_data(initializer(Uniform(stdv), param.shape, ms.float32))
            for param in lstm.b_hh_list:
                param.set_data(initializer("zeros", param.shape, ms.float32))
                param.requires_grad = False
        self.fc = FrameDense(hidden, cfg["num_classes"], weight_init=Uniform(stdv), bias_init=Uniform(stdv))

    def construct(self, x):
        x = ops.minimum(ops.relu(self.bn1(self.conv1(self.pad1(x)))), HARDTANH_MAX)
        x = ops.minimum(ops.relu(self.bn2(self.conv2(self.pad2(x)))), HARDTANH_MAX)
        x = ops.transpose(x, (0, 3, 1, 2))  # (batch, frames, channels, bins)
        x = ops.reshape(x, (-1, self.frames, self.channels * self.bins))
        zero = ops.transpose(x[:, 0:1, 0:1], (1, 0, 2)) * 0.0  # (1, batch, 1)
        h0 = ops.tile(zero, (2, 1, self.hidden))
        for lstm in self.rnn:
            x, _ = lstm(x, (h0, h0))
            x = x[:, :, : self.hidden] + x[:, :, self.hidden :]  # directions summed
        return self.fc(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> DeepSpeech2:
    cfg = spec.config_with(overrides)
    if seed is not None:
        ms.set_seed(seed)
    return DeepSpeech2(cfg)


class CTCLoss(nn.Cell):
    """Mean over utterances of -log p(transcript) (see ``models.deepspeech2.torch``)."""

    def construct(self, logits, transcripts, lengths, frames):
        log_probs = ops.transpose(ops.log_softmax(logits.astype(ms.float32), -1), (1, 0, 2))
        per_utterance, _ = ops.ctc_loss(
            log_probs, transcripts, frames, lengths, blank=BLANK, reduction="none"
        )
        return per_utterance.mean()
