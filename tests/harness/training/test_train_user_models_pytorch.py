"""dlbench train on a user's own PyTorch model (issue 18): code with a dict of outputs, a
TorchScript archive, classification and regression, synthetic and .npz data, by the CLI."""

import textwrap

import numpy as np
import pytest
import torch

from tests.utils.clitools import assert_usage_error, only_record, write_module

CODE = textwrap.dedent('''
    import torch

    class TwoHeads(torch.nn.Module):
        """An image and a sequence in; class scores and a 2-value regression out."""

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.seq = torch.nn.Linear(6, 4)
            self.score = torch.nn.Linear(8, 5)
            self.box = torch.nn.Linear(8, 2)

        def forward(self, image, tokens):
            a = torch.relu(self.bn(self.conv(image))).mean((2, 3))
            b = torch.tanh(self.seq(tokens)).mean(1)
            h = torch.cat([a, b], 1)
            return {"score": self.score(h), "box": self.box(h)}

    class Tagger(torch.nn.Module):
        """Token ids in, a class per position out: (batch, steps, classes)."""

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(40, 8)
            self.out = torch.nn.Linear(8, 4)

        def forward(self, ids):
            return self.out(self.emb(ids))

    def two_heads():
        return TwoHeads()
''')
SHAPES = ("--shape", "image=1x3x8x8", "--shape", "tokens=1x5x6")
FAST = ("--steps", "6", "--warmup-steps", "1", "--batch-size", "8", "--lr", "0.05")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("train_user_pt")
    mod = write_module(root, "code", CODE)
    torch.jit.script(mod.Tagger()).save(str(root / "tagger.pt"))
    ep = torch.export.export(mod.Tagger(), (torch.zeros(2, 7, dtype=torch.int64),))
    torch.export.save(ep, str(root / "tagger.pt2"))
    return root


def _losses_fall(rec):
    losses = rec["metrics"]["losses"]
    assert all(np.isfinite(losses)), losses
    assert min(losses[-3:]) < losses[0], losses


def test_code_model_classification_then_its_weights_bench(cli, workdir, saved):
    code = f"{saved / 'code.py'}:two_heads"
    out = cli(
        "train",
        "--model-from",
        code,
        *SHAPES,
        "--objective",
        "classification",
        "--loss-output",
        "score",
        "--eval",
        *FAST,
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "t.json")
    assert r["status"] == "ok", r["error"]
    assert r["model"] == "code_two_heads" and r["framework"] == "pytorch" and r["batch_size"] == 8
    ident = r["context"]["identity"]
    assert ident["objective"] == "classification" and ident["loss_output"] == "score"
    assert ident["inputs"] == {"image": [3, 8, 8], "tokens": [5, 6]}
    assert ident["user_source"]["model_from"].endswith("code.py:two_heads")
    user = r["context"]["user_model"]
    assert user["output_shape"] == [5] and user["label_shape"] == []
    assert {o["name"] for o in user["outputs"]} == {"score", "box"}
    assert r["context"]["layout"] == "the model's own"
    _losses_fall(r)
    ev = r["metrics"]["eval"]
    assert ev["samples"] == 256 and 0 <= ev["accuracy"] <= 1

    weights = workdir / "runs" / "code_two_heads" / "pytorch" / "model.pt"
    assert r["context"]["checkpoint"] == str(weights.relative_to(workdir))
    assert not (weights.parent / "manifest.json").exists()  # no zoo manifest to mislead
    state = torch.load(weights, weights_only=True)
    assert "score.weight" in state and "bn.running_mean" in state  # the user's own names
    out = cli(
        "bench",
        "--model-from",
        code,
        "--weights",
        str(weights),
        *SHAPES,
        "-b",
        "pytorch",
        "--batch-sizes",
        "2",
        "--iterations",
        "3",
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert only_record(workdir, "b.json")["status"] in ("ok", "unstable")


def test_regression_on_a_chosen_output_from_npz_data(cli, workdir, saved):
    rng = np.random.default_rng(0)
    np.savez(
        workdir / "d.npz",
        image=rng.standard_normal((20, 3, 8, 8), dtype=np.float32),
        tokens=rng.standard_normal((20, 5, 6), dtype=np.float32),
        y=rng.standard_normal((20, 2), dtype=np.float32),
    )
    out = cli(
        "train",
        "--model-from",
        f"{saved / 'code.py'}:two_heads",
        *SHAPES,
        "--objective",
        "regression",
        "--loss-output",
        "box",
        "--data",
        "d.npz",
        *FAST,
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "t.json")
    assert r["status"] == "ok", r["error"]
    assert r["context"]["user_model"]["label_shape"] == [2]
    assert r["context"]["data"]["reader"] == "npz" and r["context"]["data"]["per_step"]
    assert len(r["metrics"]["data_time_s"]) == 6  # read per step, timed apart
    _losses_fall(r)

    np.savez(
        workdir / "bad.npz",
        image=np.zeros((20, 3, 8, 8), np.float32),
        tokens=np.zeros((20, 5, 6), np.float32),
        y=np.zeros((20, 3), np.float32),
    )
    assert_usage_error(
        cli(
            "train",
            "--model-from",
            f"{saved / 'code.py'}:two_heads",
            *SHAPES,
            "--objective",
            "regression",
            "--loss-output",
            "box",
            "--data",
            "bad.npz",
            *FAST,
        ),
        "y has shape (20, 3)",
        "(N, 2)",
    )


def test_torchscript_tagger_per_position_classes_saved_as_torchscript(cli, workdir, saved):
    np.save(workdir / "ids.npy", np.random.default_rng(1).integers(0, 40, (8, 7)))
    out = cli(
        "train",
        str(saved / "tagger.pt"),
        "--input",
        "ids=ids.npy",
        "--objective",
        "classification",
        "--eval",
        "--eval-samples",
        "16",
        *FAST,
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "t.json")
    assert r["status"] == "ok", r["error"]
    user = r["context"]["user_model"]
    assert user["output_shape"] == [7, 4] and user["label_shape"] == [7]  # a class per step
    assert user["fills"][0]["fill"] == "file" and user["fills"][0]["dtype"] == "int64"
    assert r["metrics"]["eval"]["samples"] == 16 * 7  # scored per position
    archive = workdir / "runs" / "tagger" / "pytorch" / "tagger.torchscript.pt"
    trained = torch.jit.load(str(archive))
    before = torch.jit.load(str(saved / "tagger.pt"))
    assert not torch.equal(trained.emb.weight, before.emb.weight)  # it did learn
    out = cli(
        "bench",
        str(archive),
        "--input",
        "ids=ids.npy",
        "-b",
        "pytorch",
        "--iterations",
        "3",
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]


def test_bad_training_requests_are_one_line(cli, workdir, saved):
    code = f"{saved / 'code.py'}:two_heads"
    assert_usage_error(
        cli("train", "--model-from", code, *SHAPES), "needs --objective", "classification or regression"
    )
    assert_usage_error(
        cli("train", str(saved / "tagger.pt2"), "--objective", "regression"),
        "torch.export program",
        "--model-from",
    )
    assert_usage_error(
        cli("train", "--model-from", code, *SHAPES, "--objective", "classification", "--loss-output", "nope"),
        "no output 'nope'",
        "score, box",
    )
    assert_usage_error(
        cli(
            "train",
            "--model-from",
            code,
            *SHAPES,
            "--objective",
            "classification",
            "--loss-output",
            "box",
            "-f",
            "tensorflow",
        ),
        "is a pytorch model",
    )
    assert_usage_error(cli("train", "--model-from", code, "--objective", "regression"), "--shape image=")
    assert not (workdir / "runs").exists()
