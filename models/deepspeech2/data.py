"""Synthetic utterances that DeepSpeech2 can learn from in a few CTC steps.

Noise spectrograms with random transcripts would keep the CTC loss near its
starting value whatever the training step did.  Here every character has a
fixed spectral pattern (161 values, fixed by the seed like the image classes'
patterns in ``models.synthetic``), and an utterance is its transcript spoken
one character after another: each character fills a few frames with its
pattern plus noise, separated by short silences, so that repeated letters stay
apart, as CTC needs.  Frames after the utterance are silence (noise only).
Transcripts draw from ``ACTIVE_CHARS`` characters, so a short run sees each
many times.  One seed drives everything; the same seed gives the same bytes.

A batch, shared with the real-data reader (``harness.data.librispeech``):
``(spectrograms (batch, 1, bins, frames) float32 NCHW,
(transcripts (batch, max_transcript) int32 padded with 0, transcript lengths
(batch,) int32, output frames (batch,) int32))`` -- the labels of objective
``ctc`` (``harness.training.objectives.LABELS``), the output frames being each
utterance's frames after the conv strides (``output_frames``).
"""

from __future__ import annotations

import numpy as np

from dlbench.models.deepspeech2 import ALPHABET, output_frames
from dlbench.models.registry import ModelSpec

ACTIVE_CHARS = 8
NOISE = 0.3
CHAR_FRAMES = (4, 6)  # frames a character lasts (two to three output frames)
GAP_FRAMES = 2  # silence between characters (one output frame)


def labels_for(spec: ModelSpec, transcripts: list[list[int]], frames: np.ndarray):
    """The ``ctc`` labels of a batch: padded transcripts, their lengths, output frames."""
    width = spec.config["max_transcript"]
    padded = np.zeros((len(transcripts), width), np.int32)
    for row, ids in enumerate(transcripts):
        padded[row, : len(ids)] = ids
    lengths = np.array([len(t) for t in transcripts], np.int32)
    return padded, lengths, output_frames(spec.config, np.asarray(frames)).astype(np.int32)


def ctc_batches(spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0):
    """``n_batches`` (spectrograms, labels) pairs for ``spec`` in the layout above."""
    bins, frames = spec.config["bins"], spec.config["frames"]
    rng = np.random.default_rng(seed)
    patterns = rng.standard_normal((len(ALPHABET), bins)).astype(np.float32)
    chars = 1 + rng.permutation(len(ALPHABET) - 1)[:ACTIVE_CHARS]  # never the blank
    # As many characters as fit in the frames at their longest.
    fit = (frames - GAP_FRAMES) // (CHAR_FRAMES[1] + GAP_FRAMES)
    most = max(1, min(spec.config["max_transcript"], fit))
    out = []
    for _ in range(n_batches):
        x = NOISE * rng.standard_normal((batch_size, 1, bins, frames), dtype=np.float32)
        transcripts, used = [], np.zeros(batch_size, np.int64)
        for row in range(batch_size):
            n = int(rng.integers(max(1, most // 2), most + 1))
            ids = rng.choice(chars, size=n).tolist()
            t = GAP_FRAMES
            for c in ids:
                d = int(rng.integers(CHAR_FRAMES[0], CHAR_FRAMES[1] + 1))
                x[row, 0, :, t : t + d] += patterns[c][:, None]
                t += d + GAP_FRAMES
            transcripts.append(ids)
            used[row] = min(frames, t)
        out.append((x, labels_for(spec, transcripts, used)))
    return out
