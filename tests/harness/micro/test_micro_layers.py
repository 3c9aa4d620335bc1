"""dlbench layer: every layer kind on every engine with equal inputs and weights, outputs
(and, in train mode, gradients) compared across frameworks; shapes from a zoo walk."""

from __future__ import annotations

import json

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.micro import layers
from dlbench.harness.micro.record import agree
from tests.utils.clitools import assert_usage_error, micro_records

FAST = ["--min-duration", "0.02", "--min-iterations", "2", "--warmup", "1", "--threads", "1"]
SHAPES = {
    "conv": "2x8x12x12:16k3s2",
    "dwconv": "2x8x12x12:k3",
    "dense": "8x32x16",
    "bn": "2x8x6x6",
    "maxpool": "2x4x9x9:k3s2p1",
    "avgpool": "2x4x9x9:k3s2",
    "layernorm": "2x5x16",
    "embedding": "4x6:50x8",
    "lstm": "3x5x8:12",
    "mha": "2x5x16:h4",
    "relu": "4x10",
    "gelu": "4x10",
    "sigmoid": "4x10",
    "tanh": "4x10",
}
# Backward differs in kind for these (weights, batch statistics, recurrence, a gather).
TRAINED = ("conv", "bn", "lstm", "embedding", "layernorm", "mha")


def test_shapes_parse_count_and_come_from_the_walk():
    assert set(SHAPES) == set(layers.TYPES)
    conv = layers.parse("conv", "16x64x56x56:64k3")
    assert conv.label == "conv 16x64x56x56:64k3" and layers.out_shape(conv) == (16, 64, 56, 56)
    assert conv.flops() == 2 * 16 * 64 * 56 * 56 * 64 * 9
    pool = layers.parse("maxpool", "1x64x112x112:k3s2")
    assert layers.out_shape(pool) == (1, 64, 55, 55)
    assert layers.parse("avgpool", "1x8x4x4:k2").dims[5] == 2  # stride = window
    padded = layers.parse("maxpool", "1x64x112x112:k3s2p1")
    assert padded.label == "maxpool 1x64x112x112:k3s2p1" and layers.out_shape(padded)[2:] == (56, 56)
    lstm = layers.parse("lstm", "32x50x128:256")
    assert lstm.flops() == 2 * 32 * 50 * 4 * 256 * (128 + 256)
    for kind, bad in (
        ("conv", "1x3x8x8"),
        ("lstm", "2x3x4"),
        ("maxpool", "1x1x2x2:k3"),
        ("relu", "0x4"),
        ("nosuch", "4"),
    ):
        with pytest.raises(UserError):
            layers.parse(kind, bad)
    resnet = layers.from_model("resnet50", 2)
    kinds = [op.kernel for op in resnet]
    assert kinds[:3] == ["conv", "bn", "relu"] and kinds[-1] == "dense"
    assert resnet[0].dims == (2, 3, 224, 224, 64, 7, 2) and resnet[1].dims == (2, 64, 112, 112)
    assert len(set(resnet)) == len(resnet)
    # The network's own pooling windows: the padded stem max pool, the global average.
    assert [op.label for op in resnet if "pool" in op.kernel] == [
        "maxpool 2x64x112x112:k3s2p1",
        "avgpool 2x2048x7x7:k7",
    ]
    bert = [op.label for op in layers.from_model("bert-tiny", 2)]
    assert "mha 2x64x128:h2" in bert and "layernorm 2x64x128" in bert
    assert "embedding 2x64:1024x128" in bert and "dense 128x128x512" in bert  # 2 x 64 tokens
    assert [op.label for op in layers.from_model("lstm-tiny", 2)] == [
        "embedding 2x32:256x16",
        "lstm 2x32x16:16",
        "lstm 2x32x32:16",
        "dense 2x32x2",
    ]
    # LeNet's convolutions are unpadded, micro's pad R//2: only its dense layers are taken.
    assert {op.kernel for op in layers.from_model("lenet5", 2)} == {"dense"}
    # VGG's convolutions have no batch norm after them: none is made up.
    vgg = [op.kernel for op in layers.from_model("vgg16", 1)]
    assert "bn" not in vgg and vgg[:3] == ["conv", "relu", "conv"] and vgg.count("dense") == 3


def test_a_disagreeing_engine_fails_its_cell():
    def record(engine, out):
        return {
            "status": "ok",
            "backend": engine,
            "precision": "fp32",
            "model": "relu 4",
            "error": None,
            "metrics": {"sample": {"shape": [4], "output": out}},
        }

    reference = {}
    first = record("pytorch", [1.0, 2.0, 3.0, 4.0])
    agree(first, reference)
    assert first["metrics"]["agreement"] == {"reference": "pytorch"}
    close = record("tensorflow", [1.0, 2.0, 3.0, 4.0000001])
    agree(close, reference)
    assert close["status"] == "ok" and close["metrics"]["agreement"]["output"] < 1e-6
    off = record("mindspore", [1.0, 2.0, 3.0, 4.1])
    agree(off, reference)
    assert off["status"] == "failed" and "differs from pytorch's" in off["error"]


# Where isolation is not what a test is about, every layer type's cells of one engine run
# in one process (--process engine): 4 processes instead of 56, the same comparisons.  The
# per-cell path is the default, which test_a_resumed_group_keeps_its_reference runs (and
# tests/harness/micro/test_micro.py's every cell).
SHARED = ["--process", "engine"]
TYPED = [f"--shape={kind}={shape}" for kind, shape in SHAPES.items()]


def test_every_layer_forward_on_every_engine_agrees(cli, workdir):
    db = workdir / "l.sqlite"
    res = cli("layer", *TYPED, "--db", str(db), *FAST, *SHARED)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "(+13 in its process)" in res.stderr
    rows = micro_records(db)
    assert len(rows) == 4 * len(SHAPES)
    assert {r["model"].split()[0] for r in rows} == set(SHAPES)
    for r in rows:
        assert r["status"] in ("ok", "unstable") and r["context"]["mode"] == "forward"
        assert r["context"]["process"] == "engine"
        agreement = r["metrics"]["agreement"]
        assert agreement["reference"] == "pytorch"
        if r["backend"] != "pytorch":
            assert agreement["output"] <= 1e-3, r


def test_train_mode_compares_gradients_too(cli, workdir):
    db = workdir / "l.sqlite"
    typed = [f"--shape={kind}={SHAPES[kind]}" for kind in TRAINED]
    res = cli("layer", *typed, "--mode", "train", "--db", str(db), *FAST, *SHARED)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "onnxruntime has no fp32 train layer: left out" in res.stderr
    rows = micro_records(db)
    assert len(rows) == 3 * len(TRAINED)
    assert {r["backend"] for r in rows} == {"pytorch", "tensorflow", "mindspore"}
    for r in rows:
        assert r["context"]["mode"] == "train" and r["status"] in ("ok", "unstable")
        if r["backend"] != "pytorch":
            assert r["metrics"]["agreement"]["grad"] <= 1e-3, r
        assert (
            r["metrics"]["flops_per_call"]
            == 3 * layers.parse(r["model"].split()[0], r["model"].split()[1]).flops()
        )


def test_a_resumed_group_keeps_its_reference(cli, workdir):
    """The reference engine's cell done in an earlier sweep: a resumed sweep compares the
    next engine with its stored sample instead of making that engine the reference."""
    db = str(workdir / "r.sqlite")
    res = cli("layer", "tanh", "--shape", "4x10", "-e", "pytorch", "--db", db, *FAST)
    assert res.returncode == 0, res.stdout[-3000:]
    res = cli("layer", "tanh", "--shape", "4x10", "-e", "pytorch,onnxruntime", "--resume", "--db", db, *FAST)
    assert res.returncode == 0, res.stdout[-3000:]
    first, ort = micro_records(db)
    assert first["backend"] == "pytorch" and ort["backend"] == "onnxruntime"
    assert ort["metrics"]["agreement"]["reference"] == "pytorch"
    assert ort["metrics"]["agreement"]["output"] <= 1e-3


def test_bad_input_is_one_line(cli, workdir):
    for args, needle in (
        (["conv"], "--shape"),
        (["conv", "--shape", "1x3"], "NxCxHxW:KkR"),
        (["relu", "--shape", "4", "--mode", "backward"], "unknown mode"),
        (["relu", "--shape", "4", "--engine", "numpy"], "unknown engine"),
        (["--model", "resnet50", "--shape", "4"], "not both"),
        (["--shape", "4x10"], "give a layer type first, or the shape as TYPE=4x10"),
        (["--shape", "swish=4x10"], "unknown layer type 'swish'"),
        (["--shape", "relu=4x10", "--process", "thread"], "--process"),
    ):
        assert_usage_error(cli("layer", *args, "--db", str(workdir / "x.sqlite")), needle)


@pytest.mark.gpu
def test_micro_and_layer_cells_run_on_cuda_in_ieee_fp32(cli, workdir):
    """The same cells on an NVIDIA GPU: PyTorch's GEMM with TF32 off (read back), and a
    layer whose CUDA output agrees with the CPU engines' reference."""
    db = str(workdir / "g.sqlite")
    res = cli(
        "micro",
        "gemm",
        "--shape",
        "1024",
        "--engine",
        "pytorch",
        "--device",
        "cuda",
        "--precision",
        "fp32,bf16",
        "--db",
        db,
        *FAST,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    rows = micro_records(db)
    fp32 = next(r for r in rows if r["precision"] == "fp32")
    assert fp32["device"] == "cuda" and fp32["context"]["math_mode"]
    assert "ieee" in json.dumps(fp32["context"]["math_mode"]).lower()
    res = cli(
        "layer",
        "conv",
        "--shape",
        "8x64x28x28:64k3",
        "--engine",
        "pytorch",
        "--device",
        "cuda",
        "--mode",
        "forward,train",
        "--db",
        db,
        *FAST,
    )
    assert res.returncode == 0, res.stdout[-3000:]


def test_bf16_layers_agree_across_pytorch_and_keras(cli, workdir):
    """bfloat16 weights, inputs and compute in both engines (Keras' "bfloat16" policy,
    PyTorch's .to(bfloat16)), forward and backward, within bf16's tolerance; MindSpore's
    CPU kernels have none, and the note says so."""
    db = workdir / "b.sqlite"
    res = cli(
        "layer",
        *(f"--shape={kind}={SHAPES[kind]}" for kind in ("conv", "mha")),
        "--precision",
        "bf16",
        "--mode",
        "forward,train",
        "--engine",
        "pytorch,tensorflow,mindspore",
        "--db",
        str(db),
        *FAST,
        *SHARED,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    assert "mindspore has no bf16 forward layer (it has fp32): its CPU kernels take no bfloat16" in res.stderr
    rows = micro_records(db)
    assert len(rows) == 2 * 2 * 2
    for r in rows:
        assert r["status"] in ("ok", "unstable") and r["precision"] == "bf16", r["error"]
        if r["backend"] == "tensorflow":
            assert r["context"]["runtime"]["library"].endswith(", bfloat16)"), r["context"]
            agreement = r["metrics"]["agreement"]
            assert agreement["reference"] == "pytorch" and agreement["output"] <= 5e-2, r
            assert r["context"]["mode"] == "forward" or agreement["grad"] <= 5e-2, r
