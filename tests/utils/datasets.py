"""Tiny data sets in the real on-disk formats, written for tests (nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

CIFAR_RECORD = 1 + 3 * 32 * 32


def cifar_records(labels, seed: int = 0) -> tuple[bytes, np.ndarray]:
    """CIFAR-10 binary records with these labels; also the (N, 3, 32, 32) uint8 pixels."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (len(labels), 3, 32, 32), dtype=np.uint8)
    rows = np.concatenate([np.asarray(labels, np.uint8)[:, None], pixels.reshape(len(labels), -1)], axis=1)
    return rows.tobytes(), pixels


def write_cifar(root: Path, per_file: int = 20, files: int = 2, test: int = 12) -> dict:
    """``data_batch_1..files.bin`` + ``test_batch.bin``; labels cycle 0-9."""
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for k in range(1, files + 1):
        labels = [(i + k) % 10 for i in range(per_file)]
        data, pixels = cifar_records(labels, seed=k)
        (root / f"data_batch_{k}.bin").write_bytes(data)
        out[f"data_batch_{k}"] = (labels, pixels)
    if test:
        labels = [i % 10 for i in range(test)]
        data, pixels = cifar_records(labels, seed=99)
        (root / "test_batch.bin").write_bytes(data)
        out["test"] = (labels, pixels)
    return out


COLOURS = {"blue": (0, 0, 255), "green": (0, 255, 0), "red": (255, 0, 0)}


def write_imagefolder(
    root: Path, per_class: int = 3, val: bool = True, flat: bool = False, size=(48, 40)
) -> None:
    """Solid-colour JPEGs, one colour per class (classes sort as blue, green, red)."""
    from PIL import Image

    splits = [root] if flat else [root / "train"] + ([root / "val"] if val else [])
    for split in splits:
        for name, rgb in COLOURS.items():
            d = split / name
            d.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                Image.new("RGB", size, rgb).save(d / f"img_{i}.JPEG", quality=95)


REVIEWS = {
    "pos": [
        "A great film.<br /><br />Great acting, great story!",
        "Loved it: great fun",
        "great great GREAT",
        "Wonderful and great",
    ],
    "neg": ["Awful film.<br />Boring story", "boring, awful acting", "awful awful", "Not good"],
}


def write_aclimdb(root: Path, test: bool = True) -> None:
    for split in ("train", "test") if test else ("train",):
        for label, texts in REVIEWS.items():
            d = root / split / label
            d.mkdir(parents=True, exist_ok=True)
            for i, t in enumerate(texts):
                (d / f"{i}_{7 if label == 'pos' else 2}.txt").write_text(t, encoding="utf-8")


def write_corpus(path: Path, documents: int = 6, sentences: int = 5) -> list[list[str]]:
    """Documents of sentences; document d's sentences use words wd_*; blank-line separated."""
    docs = [
        [" ".join(f"w{d}x{s}x{j}" for j in range(3 + (s % 3))) + "." for s in range(sentences)]
        for d in range(documents)
    ]
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return docs


def check_cifar_run_and_eval(framework: str, tmp_path: Path, **cfg) -> dict:
    """Train resnet50-mini on a tiny CIFAR-10 directory through the shared loop, with
    --eval, and check what a real reader must report.  Imports the framework."""
    from dlbench.harness.training import loop
    from dlbench.harness.training.base import TrainConfig

    write_cifar(tmp_path / "cifar", per_file=12, files=2, test=10)
    config = TrainConfig(
        model="resnet50-mini",
        framework=framework,
        batch_size=4,
        steps=3,
        warmup_steps=1,
        data=f"cifar10:{tmp_path / 'cifar'}",
        eval=True,
        **cfg,
    )
    r = loop.run(config, tmp_path / "out")
    assert len(r["data_time_s"]) == 3 and all(t > 0 for t in r["data_time_s"])
    assert len(r["warmup_data_time_s"]) == 1
    assert r["data_time"]["total"] == sum(r["data_time_s"])
    assert r["data_time"]["p50"] <= r["data_time"]["p90"]
    samples = 3 * 4
    assert abs(r["throughput_sps"] * r["window_s"] - samples) < 1e-6
    wall = r["window_s"] + r["data_time"]["total"]
    assert abs(r["throughput_with_data_sps"] * wall - samples) < 1e-6
    assert r["throughput_with_data_sps"] < r["throughput_sps"]
    assert sum(r["step_times_s"]) <= r["window_s"] + 1e-9
    assert r["data"]["reader"] == "cifar10" and r["data"]["splits"] == {"train": 24, "test": 10}
    ev = r["eval"]
    assert ev["samples"] == 10 and ev["split"] == "test"  # last batch short: 4+4+2
    assert 0 <= ev["accuracy"] <= 1 and 0 < ev["loss"] < 50
    return r


def check_eval_is_inference_mode(session_cls, framework: str, **cfg) -> None:
    """Inference mode: a sample's loss does not depend on its batch companions (in
    training mode batch norm would use the batch's statistics) nor on evaluating twice."""
    from dlbench.harness.training.base import TrainConfig
    from dlbench.models import synthetic
    from dlbench.models.registry import get_model

    spec = get_model("resnet50-mini")
    config = TrainConfig(model=spec.name, framework=framework, batch_size=4, steps=1, **cfg)
    [(x, y)] = synthetic.image_batches(spec, 4, 1, seed=7, layout=session_cls.layout)
    session = session_cls(spec, config, [(x, y)])
    whole = session.evaluate([(x, y)])
    halves = session.evaluate([(x[:1], y[:1]), (x[1:], y[1:])])
    again = session.evaluate([(x, y)])
    assert whole["samples"] == halves["samples"] == 4
    assert whole["correct"] == halves["correct"] and 0 <= whole["correct"] <= 4
    assert abs(whole["loss"] - halves["loss"]) < 1e-3 * max(1.0, abs(whole["loss"]))
    assert abs(whole["loss"] - again["loss"]) < 1e-5 * max(1.0, abs(whole["loss"]))


def write_librispeech(
    root: Path, utterances: dict[str, list[tuple[str, float]]], rate: int = 16_000, audio: str = "wav"
) -> None:
    """LibriSpeech's layout: ``root/SPLIT/SPEAKER/CHAPTER/`` holding
    ``SPEAKER-CHAPTER.trans.txt`` (``ID TRANSCRIPT`` lines, upper case as LibriSpeech's)
    and ``ID.wav`` or ``ID.flac`` (16-bit PCM mono, ``audio``): ``utterances`` maps SPLIT
    to (transcript, seconds); each utterance is a tone whose pitch follows its index,
    plus a little noise."""
    import wave

    rng = np.random.default_rng(0)
    for split, items in utterances.items():
        folder = root / split / "19" / "198"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, (text, seconds) in enumerate(items):
            utt = f"19-198-{i:04d}"
            t = np.arange(int(seconds * rate)) / rate
            signal = 0.3 * np.sin(2 * np.pi * (300 + 100 * i) * t) + 0.01 * rng.standard_normal(len(t))
            pcm = (signal * 32767).astype("<i2")
            if audio == "flac":
                import soundfile

                soundfile.write(str(folder / f"{utt}.flac"), pcm, rate, subtype="PCM_16")
            else:
                with wave.open(str(folder / f"{utt}.wav"), "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(rate)
                    w.writeframes(pcm.tobytes())
            lines.append(f"{utt} {text.upper()}")
        (folder / "19-198.trans.txt").write_text("\n".join(lines) + "\n")
