"""LibriSpeech speech: FLAC or wav files and ``*.trans.txt`` transcripts, for DeepSpeech2.

Layout (LibriSpeech's): anywhere under ROOT, a file ``SPEAKER-CHAPTER.trans.txt``
whose lines read ``UTTERANCE-ID TRANSCRIPT``, and beside it ``UTTERANCE-ID.flac``
(as LibriSpeech ships it) or ``UTTERANCE-ID.wav``: mono at 16 kHz, 16-bit PCM for
wav.  FLAC is decoded by libsndfile (the ``soundfile`` package, imported only
when a .flac is read); wav by the standard library.
Utterances under a top-level folder named ``dev*`` or ``test*`` (``dev-clean``,
``test-other``) are the held-out split; everything else trains.

Features are DeepSpeech2's: the log magnitude spectrogram ``log(1 + |STFT|)``
of 20 ms Hamming windows every 10 ms (320 and 160 samples at 16 kHz: 161
bins), no centring padding, normalized to mean 0 and std 1 per utterance
(deepspeech.pytorch's choice), then padded with zeros (the mean) to the
model's frames.  Transcripts are lower-cased onto the model's alphabet
(``models.deepspeech2.ctc``).  Every utterance is decoded and transformed once,
before the clock (``prepare``), and kept in memory at its own length; per step
only padding and batching remain.

An utterance longer than the model's frames, or whose transcript is longer
than its ``max_transcript`` or cannot be aligned by CTC in its output frames
(one frame per character, plus one between repeated letters), is left out
and counted (``describe``: ``skipped``): cutting audio would cut its
transcript at an unknown place.  ``deepspeech2`` takes 5 s, so on LibriSpeech
(12 s on average) only its short utterances train.
"""

from __future__ import annotations

import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.data.base import (
    Batch,
    Dataset,
    check_batch,
    epoch_indices,
    image_input,
    ordered_indices,
    to_layout,
)
from dlbench.models.registry import ModelSpec

RATE = 16_000
WINDOW_S, HOP_S = 0.020, 0.010
HELD_OUT = ("dev", "test")
MAX_DEPTH = 4  # LibriSpeech: ROOT/split/speaker/chapter/*.trans.txt


def transcript_files(path: Path) -> list[Path]:
    """``*.trans.txt`` files at most ``MAX_DEPTH`` folders below ``path``."""
    found: list[Path] = []
    for depth in range(MAX_DEPTH + 1):
        found += sorted(path.glob("/".join(["*"] * depth + ["*.trans.txt"])))
    return found


def looks_like(path: Path) -> bool:
    return path.is_dir() and any(
        next(iter(path.glob("/".join(["*"] * d + ["*.trans.txt"]))), None) is not None
        for d in range(MAX_DEPTH + 1)
    )


AUDIO = (".flac", ".wav")  # looked for in this order beside a transcript


def read_audio(path: Path) -> np.ndarray:
    """Samples of a mono 16 kHz recording as float32 in [-1, 1)."""
    return read_flac(path) if path.suffix == ".flac" else read_wav(path)


def read_flac(path: Path) -> np.ndarray:
    try:
        import soundfile
    except ImportError:
        raise UserError(
            f"{path}: reading FLAC needs the soundfile package "
            f"(pip install soundfile), or give the audio as .wav"
        ) from None
    try:
        samples, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as e:
        raise UserError(f"{path}: not a readable FLAC file ({e})") from None
    if (samples.shape[1], rate) != (1, RATE):
        raise UserError(f"{path}: {samples.shape[1]} channel(s) at {rate} Hz; want mono at {RATE} Hz")
    return samples[:, 0]


def read_wav(path: Path) -> np.ndarray:
    """Samples of a 16-bit PCM mono 16 kHz wav as float32 in [-1, 1)."""
    with wave.open(str(path), "rb") as w:
        if (w.getsampwidth(), w.getnchannels(), w.getframerate()) != (2, 1, RATE):
            raise UserError(
                f"{path}: {8 * w.getsampwidth()}-bit, {w.getnchannels()} channel(s), "
                f"{w.getframerate()} Hz; want 16-bit PCM mono at {RATE} Hz"
            )
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0


def spectrogram(samples: np.ndarray, bins: int = 161) -> np.ndarray:
    """(bins, frames) normalized log spectrogram (see the module's text); ``bins`` =
    n_fft / 2 + 1 with n_fft the 20 ms window (161 at 16 kHz)."""
    window, hop = int(RATE * WINDOW_S), int(RATE * HOP_S)
    if bins != window // 2 + 1:
        raise UserError(
            f"the model takes {bins} frequency bins; 20 ms windows at {RATE} Hz give {window // 2 + 1}"
        )
    if len(samples) < window:
        samples = np.pad(samples, (0, window - len(samples)))
    n = 1 + (len(samples) - window) // hop
    frames = np.lib.stride_tricks.as_strided(
        samples, (n, window), (samples.strides[0] * hop, samples.strides[0]), writeable=False
    )
    spec = np.log1p(np.abs(np.fft.rfft(frames * np.hamming(window), axis=1))).T
    spec = (spec - spec.mean()) / max(float(spec.std()), 1e-6)
    return spec.astype(np.float32)


def ctc_fits(ids: list[int], frames: int) -> bool:
    """Whether CTC can align ``ids`` in ``frames`` output frames (repeats need a blank)."""
    repeats = sum(1 for a, b in zip(ids, ids[1:]) if a == b)
    return 0 < len(ids) and len(ids) + repeats <= frames


class LibriSpeech(Dataset):
    format = "librispeech"

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(spec, path)
        source = self.describe_source()
        if spec.objective != "ctc":
            raise UserError(f"{source}: speech with transcripts, but {spec.name} does not train with CTC")
        _, self.bins, self.frames = image_input(spec, source)
        if not looks_like(path):
            raise UserError(f"{source}: no *.trans.txt transcripts under the directory")
        splits = {self._split(f) for f in transcript_files(path)}
        self.eval_split = "test" if "test" in splits else None
        self.items: dict[str, list[tuple[np.ndarray, list[int]]]] = {}
        self.skipped = 0

    def _split(self, trans: Path) -> str:
        top = trans.relative_to(self.path).parts[0]
        return "test" if top.lower().startswith(HELD_OUT) and top != trans.name else "train"

    def no_eval_reason(self) -> str:
        return "no top-level dev* or test* folder"

    def prepare(self) -> None:
        from dlbench.models.deepspeech2 import ctc, output_frames

        width = self.spec.config["max_transcript"]
        self.items = {"train": [], **({"test": []} if self.eval_split else {})}
        for trans in transcript_files(self.path):
            for line in trans.read_text(encoding="utf-8").splitlines():
                utt, _, text = line.strip().partition(" ")
                if not utt:
                    continue
                audio = next(
                    (
                        trans.parent / f"{utt}{ext}"
                        for ext in AUDIO
                        if (trans.parent / f"{utt}{ext}").is_file()
                    ),
                    None,
                )
                if audio is None:
                    raise UserError(
                        f"{self.describe_source()}: {trans.name} names {utt}, "
                        f"but neither {utt}.flac nor {utt}.wav is in "
                        f"{trans.parent}"
                    )
                features = spectrogram(read_audio(audio), self.bins)
                ids = ctc.encode(text)
                n = features.shape[1]
                if (
                    n > self.frames
                    or len(ids) > width
                    or not ctc_fits(ids, int(output_frames(self.spec.config, n)))
                ):
                    self.skipped += 1
                    continue
                self.items[self._split(trans)].append((features, ids))
        if not self.items["train"]:
            raise UserError(
                f"{self.describe_source()}: no training utterance fits "
                f"{self.spec.name} ({self.frames} frames, {width} characters); "
                f"{self.skipped} skipped"
            )

    def split_sizes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.items.items()}

    def describe(self) -> dict:
        return {
            **super().describe(),
            "skipped": self.skipped,
            "bins": self.bins,
            "frames": self.frames,
            "features": "log(1+|STFT|), 20 ms Hamming / 10 ms",
        }

    def _batch(self, items, layout: str) -> Batch:
        from dlbench.models.deepspeech2.data import labels_for

        x = np.zeros((len(items), 1, self.bins, self.frames), np.float32)
        for row, (features, _) in enumerate(items):
            x[row, 0, :, : features.shape[1]] = features
        frames = np.array([f.shape[1] for f, _ in items])
        return to_layout(x, layout), labels_for(self.spec, [ids for _, ids in items], frames)

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        if not self.items:
            self.prepare()
        items = self.items["train"]
        check_batch(self, batch_size, len(items))
        for idx in epoch_indices(len(items), batch_size, np.random.default_rng(seed)):
            yield self._batch([items[i] for i in idx], layout)

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        self.require_eval()
        if not self.items:
            self.prepare()
        items = self.items["test"]
        for idx in ordered_indices(len(items), batch_size, limit):
            yield self._batch([items[i] for i in idx], layout)
