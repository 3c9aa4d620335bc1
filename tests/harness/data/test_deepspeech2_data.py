"""DeepSpeech2's framework-free parts: the analytic size, the LibriSpeech-style reader
(on small wav files written here), the synthetic utterances, and host-side CTC (the
numpy loss, greedy decoding, the character-error tally)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.data import open_dataset, parse
from dlbench.harness.data.librispeech import spectrogram
from dlbench.harness.evaluate.scoring import tally_for
from dlbench.models import synthetic
from dlbench.models.deepspeech2 import ALPHABET, ctc, output_frames
from dlbench.models.registry import get_model
from tests.utils.datasets import write_librispeech

MINI = get_model("deepspeech2-mini")


def test_full_size_and_alphabet():
    spec = get_model("deepspeech2")
    # conv 14,432 + 236,544, BN 128; LSTM (1312 -> 800) 2 x 6,761,600, four (800 -> 800)
    # at 2 x 5,123,200 each; fc 800 x 29 + 29.
    assert spec.parameter_count == 54_783_133
    assert spec.macs_per_sample == 16_341_824_000
    assert spec.inputs[0].shape == (1, 161, 500) and spec.num_classes == len(ALPHABET) == 29
    assert ALPHABET[0] == "_" and ALPHABET[1:3] == " '"
    assert output_frames(spec.config, 500) == 250
    assert list(output_frames(spec.config, np.array([1, 2, 3, 64]))) == [1, 1, 2, 32]


def _reader(tmp_path, **extra):
    write_librispeech(
        tmp_path / "LibriSpeech",
        {
            "train-clean-100": [
                ("hello world", 0.30),
                ("it's a test", 0.25),
                ("abc", 0.2),
                ("too long for sixty four frames", 0.9),
            ]
            + list(extra.get("train", [])),
            "dev-clean": [("dev one", 0.3), ("dev two", 0.4)],
        },
    )
    return open_dataset(str(tmp_path / "LibriSpeech"), MINI)


def test_librispeech_reader_spectrograms_transcripts_and_splits(tmp_path):
    ds = _reader(tmp_path)
    assert parse(str(tmp_path / "LibriSpeech"))[0] == "librispeech"
    assert ds.format == "librispeech" and ds.eval_split == "test"
    ds.prepare()
    # 0.9 s is 89 frames, past the mini's 64: skipped, not cut.
    assert ds.split_sizes() == {"train": 3, "test": 2} and ds.skipped == 1
    x, (transcripts, lengths, frames) = next(ds.eval_batches(2, "NCHW"))
    assert x.shape == (2, 1, 161, 64) and x.dtype == np.float32
    assert [ctc.decode(t[:n]) for t, n in zip(transcripts, lengths)] == ["dev one", "dev two"]
    assert transcripts.shape == (2, MINI.config["max_transcript"]) and transcripts.dtype == np.int32
    # 0.3 s = 4,800 samples: 1 + (4800 - 320) // 160 = 29 frames, 15 after the strides.
    assert list(frames) == [15, 20]
    assert np.all(x[0, 0, :, 29:] == 0) and abs(float(x[0, 0, :, :29].std()) - 1) < 1e-4
    nhwc, _ = next(ds.eval_batches(2, "NHWC"))
    np.testing.assert_array_equal(nhwc, x.transpose(0, 2, 3, 1))
    batch, labels = next(ds.train_batches(2, seed=0, layout="NCHW"))
    assert batch.shape == (2, 1, 161, 64) and len(labels) == 3


def test_flac_as_librispeech_ships_it_reads_as_its_wav(tmp_path):
    """FLAC is lossless: the same 16-bit samples give the same features as the wav."""
    items = {"train": [("hello world", 0.30), ("abc", 0.2)], "test": [("dev one", 0.3)]}
    write_librispeech(tmp_path / "wav", items)
    write_librispeech(tmp_path / "flac", items, audio="flac")
    assert not list((tmp_path / "flac").rglob("*.wav"))
    assert parse(str(tmp_path / "flac"))[0] == "librispeech"
    wav, flac = (open_dataset(str(tmp_path / d), MINI) for d in ("wav", "flac"))
    wav.prepare()
    flac.prepare()
    assert flac.split_sizes() == wav.split_sizes() == {"train": 2, "test": 1}
    for split in ("train", "test"):
        for (fa, ia), (fb, ib) in zip(wav.items[split], flac.items[split]):
            np.testing.assert_array_equal(fa, fb)
            assert ia == ib


def test_unreadable_or_wrong_flac_is_one_clear_error(tmp_path):
    import soundfile

    write_librispeech(tmp_path / "ls", {"train": [("hi", 0.2)]}, audio="flac")
    [flac] = (tmp_path / "ls").rglob("*.flac")
    soundfile.write(str(flac), np.zeros((3200, 2), np.int16), 16_000, subtype="PCM_16")
    with pytest.raises(UserError, match="2 channel.* want mono at 16000 Hz"):
        open_dataset(str(tmp_path / "ls"), MINI).prepare()
    flac.write_bytes(b"not audio at all")
    with pytest.raises(UserError, match="not a readable FLAC file"):
        open_dataset(str(tmp_path / "ls"), MINI).prepare()
    flac.unlink()
    with pytest.raises(UserError, match="neither 19-198-0000.flac nor 19-198-0000.wav"):
        open_dataset(str(tmp_path / "ls"), MINI).prepare()


def test_spectrogram_is_the_log_stft_of_20ms_hamming_windows():
    rate, n = 16_000, 3_200
    tone = np.sin(2 * np.pi * 1000 * np.arange(n) / rate).astype(np.float32)
    s = spectrogram(tone)
    assert s.shape == (161, 1 + (n - 320) // 160)
    # 1 kHz sits in bin 1000 / (16000 / 320) = 20.
    assert int(np.argmax(s[:, 5])) == 20
    frame = tone[160 * 5 : 160 * 5 + 320] * np.hamming(320)
    raw = np.log1p(np.abs(np.fft.rfft(frame)))
    ref = np.log1p(
        np.abs(
            np.fft.rfft(np.lib.stride_tricks.sliding_window_view(tone, 320)[::160] * np.hamming(320), axis=1)
        )
    ).T
    np.testing.assert_allclose(s[:, 5], (raw - ref.mean()) / ref.std(), rtol=1e-4, atol=1e-4)


def test_reader_refuses_wrong_audio_and_wrong_models(tmp_path):
    write_librispeech(tmp_path / "ls", {"train": [("hi", 0.2)]}, rate=8_000)
    ds = open_dataset(str(tmp_path / "ls"), MINI)
    assert ds.eval_split is None
    with pytest.raises(UserError, match="16000 Hz"):
        ds.prepare()
    with pytest.raises(UserError, match="CTC"):
        open_dataset(f"librispeech:{tmp_path / 'ls'}", get_model("lstm-tiny"))


def test_synthetic_utterances_fit_ctc_and_follow_the_layout():
    a = synthetic.batches(MINI, 4, 2, seed=1)
    b = synthetic.batches(MINI, 4, 2, seed=1, layout="NHWC")
    for (x, (t, n, f)), (xh, _labels) in zip(a, b):
        assert x.shape == (4, 1, 161, 64) and xh.shape == (4, 161, 64, 1)
        np.testing.assert_array_equal(xh, x.transpose(0, 2, 3, 1))
        assert all(1 <= k <= MINI.config["max_transcript"] for k in n)
        assert all(k + sum(1 for p, q in zip(row[:k], row[1:k]) if p == q) <= m for row, k, m in zip(t, n, f))
        assert (t[:, 0] > 0).all() and f.max() <= 32


def _brute_force_nll(logp: np.ndarray, target: list[int]) -> float:
    """-log of the summed probability of every frame path that collapses to ``target``."""
    total = 0.0
    for path in itertools.product(range(logp.shape[1]), repeat=logp.shape[0]):
        if ctc.greedy(np.eye(logp.shape[1])[list(path)]) == target:
            total += np.exp(sum(logp[t, c] for t, c in enumerate(path)))
    return -np.log(total)


def test_numpy_ctc_is_the_sum_over_alignments():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((5, 3))
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    for target in ([1], [1, 2], [1, 1], [2, 1, 2]):
        assert ctc.nll(z, target, 5) == pytest.approx(_brute_force_nll(logp, target), rel=1e-9)
    assert ctc.nll(z, [1, 1, 1], 4) == np.inf  # needs 5 frames


def test_greedy_decoding_and_character_error_tally():
    assert ctc.encode("It's  OK!") == [ALPHABET.index(c) for c in "it's ok"]
    assert ctc.edit_distance("kitten", "sitting") == 3
    ids = ctc.encode("hello")  # h e l l o: the double l needs a blank between
    path = [ids[0], ids[0], 0, ids[1], ids[2], 0, ids[3], ids[4], 0, 0]
    logits = np.full((2, 10, 29), -5.0)
    logits[0, np.arange(10), path] = 5.0
    logits[1, np.arange(10), [ids[0], ids[1], ids[2], ids[3], ids[4], 0, 0, 0, 0, 0]] = 5.0
    assert ctc.decode(ctc.greedy(logits[0])) == "hello"
    assert ctc.decode(ctc.greedy(logits[1])) == "helo"  # repeats merged
    transcripts = np.zeros((2, 12), np.int32)
    transcripts[:, :5] = ids
    tally = tally_for("ctc")
    tally.add((logits,), (transcripts, np.array([5, 5]), np.array([10, 10])))
    r = tally.result()
    assert r["cer"] == pytest.approx(1 / 10) and r["accuracy"] == pytest.approx(0.9)
    assert r["exact_transcripts"] == 1 and r["samples"] == 2 and np.isfinite(r["loss"])


def test_dlbench_eval_scores_ctc_artifacts_with_the_character_error_tally():
    from dlbench.harness.evaluate.scoring import CharacterErrorTally, Tally, inference_tally

    assert isinstance(inference_tally("ctc"), CharacterErrorTally)
    # BERT's artifacts are its classification network, not its pre-training one.
    assert type(inference_tally("bert-pretraining")) is Tally
    assert type(inference_tally("classification")) is Tally
