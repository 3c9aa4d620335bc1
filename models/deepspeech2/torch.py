"""DeepSpeech2 in PyTorch (see ``models.deepspeech2`` for the configuration and choices).

Module paths are the canonical weight names: ``conv1``, ``bn1``, ``conv2``,
``bn2``, ``rnn.{layer}`` (one single-layer bidirectional ``nn.LSTM`` per
depth, as in ``models.lstm``) and ``fc``.  Every ``bias_hh_*`` is zero and
frozen, so the trainable parameters are Keras' single-bias LSTM's.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dlbench.models.deepspeech2 import BLANK, BN_EPS, CONVS, HARDTANH_MAX, conv_sizes
from dlbench.models.registry import ModelSpec


class DeepSpeech2(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        c, hidden = cfg["channels"], cfg["hidden_size"]
        (k1, s1, p1), (k2, s2, p2) = CONVS
        self.conv1 = nn.Conv2d(1, c, k1, s1, p1, bias=False)
        self.bn1 = nn.BatchNorm2d(c, eps=BN_EPS)
        self.conv2 = nn.Conv2d(c, c, k2, s2, p2, bias=False)
        self.bn2 = nn.BatchNorm2d(c, eps=BN_EPS)
        width = c * conv_sizes(cfg)[-1][0]
        self.rnn = nn.ModuleList(
            nn.LSTM(width if layer == 0 else hidden, hidden, batch_first=True, bidirectional=True)
            for layer in range(cfg["num_layers"])
        )
        for name, param in self.rnn.named_parameters():
            if ".bias_hh" in name:
                nn.init.zeros_(param)
                param.requires_grad_(False)
        self.hidden = hidden
        self.fc = nn.Linear(hidden, cfg["num_classes"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, 1, bins, frames) spectrograms -> (batch, frames/2, classes) logits."""
        x = torch.clamp(self.bn1(self.conv1(x)), 0.0, HARDTANH_MAX)
        x = torch.clamp(self.bn2(self.conv2(x)), 0.0, HARDTANH_MAX)
        n, c, f, t = x.shape
        x = x.reshape(n, c * f, t).transpose(1, 2)  # features channel-major
        for lstm in self.rnn:
            x, _ = lstm(x)
            x = x[..., : self.hidden] + x[..., self.hidden :]  # directions summed
        return self.fc(x)


def build(spec: ModelSpec, seed: int | None = None, **overrides: Any) -> DeepSpeech2:
    cfg = spec.config_with(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    return DeepSpeech2(cfg)


def ctc_loss(logits: torch.Tensor, labels) -> torch.Tensor:
    """Mean over utterances of -log p(transcript): ``labels`` = (transcripts, transcript
    lengths, output frames), as ``models.deepspeech2.data`` lays them out."""
    transcripts, lengths, frames = labels
    log_probs = F.log_softmax(logits.float(), dim=-1).transpose(0, 1)  # (frames, batch, C)
    per_utterance = F.ctc_loss(log_probs, transcripts, frames, lengths, blank=BLANK, reduction="none")
    return per_utterance.mean()
