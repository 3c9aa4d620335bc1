"""The seed zoo's newer families end to end through the real CLI: trained one step
in each framework, exported to ONNX, verified against the framework.

Core group: ``dlbench train`` and ``dlbench export`` run as subprocesses (each
framework in its own cell), and this process only reads their JSON.  ResNet-50's
export is tests/harness/convert/test_convert_export.py's (ResNet-152 is the same code with more
blocks); a family whose layers differ gets its own case here: VGG's biased
convolutions and channels-first flatten before the dense layers, DenseNet's
concatenations and the batch norms on them that no convolution absorbs, DIN's four
id inputs (two sequences, two single ids) and its masked, unnormalized attention,
DeepSpeech2's unequal conv padding (explicit in MindSpore, whose exporter misorders
it), LSTMs and per-frame logits; SSD's raw heads (box regressions and class scores
of every prior in one output), dilated conv6, L2Norm and padded pools; Mask R-CNN's
three inputs (the image and two sets of boxes), RoIAlign's gathers and its packed raw heads
(RPN, box and mask, in one output); GNMT's
recurrent encoder-decoder with attention, teacher forced and greedy (the same
checkpoint loaded into the unrolled greedy network with ``--model``).
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.utils.clitools import assert_usage_error
from tests.utils.frameworks import FRAMEWORKS

MODELS = ("vgg16-mini", "densenet121-mini", "din-mini", "deepspeech2-mini", "ssd300-mini", "maskrcnn-mini")
# How each framework's reference ran: (TensorFlow's execution, MindSpore's mode).
EAGER = {"pytorch": (None, None), "tensorflow": ("eager", None), "mindspore": (None, "PYNATIVE_MODE")}
# The detectors' own held-out figures that dlbench eval reports beside the loss.
EVAL_KEYS = {"ssd300-mini": ("mean_top_iou", "map", "map50"), "maskrcnn-mini": ("mask_iou",)}


def _trained_eagerly(records):
    """``--eager``: what is tested here is the checkpoint and its export, and a one-step
    run's time is mostly TensorFlow's and MindSpore's graph compile (the compiled steps
    are tests/harness/training's and each framework group's); the records say so."""
    assert [r["status"] for r in records] == ["ok"] * 3, [r["error"] for r in records]
    modes = {
        r["framework"]: r["context"]["runtime"].get("execution") or r["context"]["runtime"].get("mode")
        for r in records
    }
    assert modes == {"pytorch": None, "tensorflow": "eager", "mindspore": "PYNATIVE_MODE"}, modes
    assert all(r["context"]["config"]["eager"] for r in records)


@pytest.mark.parametrize("model", MODELS)
def test_trained_in_every_framework_and_exported_verified(model, cli, workdir):
    train = cli(
        "train",
        model,
        "--steps",
        "1",
        "--warmup-steps",
        "0",
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--eager",
        "--out",
        "train",
        "--json",
        "train.json",
    )
    assert train.returncode == 0, train.stderr[-3000:]
    _trained_eagerly(json.loads((workdir / "train.json").read_text()))
    dirs = [str(workdir / "train" / model / fw) for fw in FRAMEWORKS]
    out = cli("export", *dirs, "--threads", "1", "--json", "export.json")
    assert out.returncode == 0, out.stderr[-3000:]
    records = json.loads((workdir / "export.json").read_text())
    assert [r["framework"] for r in records] == list(FRAMEWORKS)
    for r in records:
        assert r["status"] == "ok" and r["model"] == model, (r["framework"], r["error"])
        verdict = r["metrics"]["verdict"]
        assert verdict["ok"] and verdict["batch_sizes"] == [1, 8]
        logits = verdict["outputs"]["logits"]
        assert logits["cosine"] > 0.99999 and logits["max_rel"] < 1e-3
        # Per-frame character logits (DeepSpeech2), SSD's (batch, priors, 4 + classes) and
        # Mask R-CNN's packed heads are no classifier's output: no top-1.
        assert logits["top1"] == (None if model.startswith(("deepspeech2", "ssd", "maskrcnn")) else 1.0)
        assert r["context"]["hop"] == f"{r['framework']}->onnx"
        # TensorFlow's runner holds the Keras model as the checkpoint loads it: the cell
        # exports the network its reference outputs came from instead of loading it again.
        reused = "the reference's" if r["framework"] == "tensorflow" else "loaded again"
        assert r["context"]["exported_network"] == reused
        # The reference ran eagerly (Backend.verify_options), the file in ONNX Runtime.
        runtime = r["context"]["reference_run"]["runtime"]
        assert (runtime.get("execution"), runtime.get("mode")) == EAGER[r["framework"]], runtime
        assert r["context"]["candidate_run"]["backend"] == "onnxruntime"
        if r["framework"] == "tensorflow":  # nothing in a zoo network needs freezing
            assert " convert.from_function over a tf.function" in r["context"]["export"]["exporter"]
    if model in EVAL_KEYS:
        # A detector's exported file is scored with its own tally, on its own held-out
        # scenes; class-labelled images are refused.
        onnx_file = str(workdir / "train" / model / "pytorch" / "model.onnx")
        out = cli(
            "eval",
            onnx_file,
            "--data",
            "synthetic",
            "--batch-size",
            "8",
            "--limit",
            "32",
            "--json",
            "eval.json",
        )
        assert out.returncode == 0, out.stderr[-3000:]
        [ev] = json.loads((workdir / "eval.json").read_text())
        assert ev["status"] == "ok" and ev["metrics"]["eval"]["samples"] == 32, ev
        for key in EVAL_KEYS[model]:
            assert 0 <= ev["metrics"]["eval"][key] <= 1, (key, ev["metrics"]["eval"])
        assert_usage_error(cli("eval", onnx_file), "images labelled with a class", "scored on boxes")


CHECKPOINTS = {"pytorch": "model.pt", "tensorflow": "model.keras", "mindspore": "model.ckpt"}


def _verified(records, model, shape):
    assert [r["framework"] for r in records] == list(FRAMEWORKS)
    for r in records:
        assert r["status"] == "ok" and r["model"] == model, (r["framework"], r["error"])
        verdict = r["metrics"]["verdict"]
        assert verdict["ok"] and verdict["batch_sizes"] == [1, 8]
        logits = verdict["outputs"]["logits"]
        assert logits["shape"] == shape and logits["cosine"] > 0.99999
        assert logits["max_rel"] < 1e-3


def test_gnmt_teacher_forced_and_greedy_exported_verified(cli, workdir):
    train = cli(
        "train",
        "gnmt-mini",
        "--steps",
        "1",
        "--warmup-steps",
        "0",
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--eager",
        "--out",
        "train",
        "--json",
        "train.json",
    )
    assert train.returncode == 0, train.stderr[-3000:]
    _trained_eagerly(json.loads((workdir / "train.json").read_text()))
    dirs = [workdir / "train" / "gnmt-mini" / fw for fw in FRAMEWORKS]
    out = cli("export", *map(str, dirs), "--threads", "1", "--json", "export.json")
    assert out.returncode == 0, out.stderr[-3000:]
    _verified(json.loads((workdir / "export.json").read_text()), "gnmt-mini", [12, 64])
    greedy = []
    for fw, directory in zip(FRAMEWORKS, dirs):
        (workdir / "greedy" / fw).mkdir(parents=True)
        greedy.append(shutil.copy(directory / CHECKPOINTS[fw], workdir / "greedy" / fw))
    out = cli(
        "export", *map(str, greedy), "--model", "gnmt-mini-greedy", "--threads", "1", "--json", "greedy.json"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    _verified(json.loads((workdir / "greedy.json").read_text()), "gnmt-mini-greedy", [12, 64])
