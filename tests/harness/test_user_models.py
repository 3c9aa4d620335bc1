"""A user's own models (issue 18), saved here by the test and given to the CLI: PyTorch's
TorchScript, torch.export and code; Keras's .keras, HDF5 and SavedModel files and code;
MindSpore's MindIR graph and nn.Cell code; through bench (native), export (verified),
build, train and run, and the bad inputs, each refused in one line.

Every group collects this module, so a framework is imported only inside a test or fixture
(CI installs all three: an absent one fails its tests there, it never skips them).
"""

import io
import json
import os
import sqlite3
import textwrap
import zipfile

import numpy as np
import pytest

from tests.utils.clitools import assert_usage_error, only_record, write_module
from tests.utils.frameworks import frameworks

FAST = ("--iterations", "3", "--warmup", "1", "--max-warmup", "3")

PYTORCH_CODE = textwrap.dedent("""
    import torch

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.head = torch.nn.Linear(8, 5)

        def forward(self, image):
            h = torch.relu(self.conv(image)).mean((2, 3))
            return self.head(h)

    def small():
        return Small()

    def broken():
        raise RuntimeError("needs a GPU")
""")

KERAS_CODE = textwrap.dedent("""
    import keras

    def tiny():
        x = keras.Input((6, 6, 2), name="pixels")
        h = keras.layers.Conv2D(3, 3, activation="relu")(x)
        return keras.Model(x, keras.layers.Dense(4)(keras.layers.Flatten()(h)))
""")

MINDSPORE_CODE = textwrap.dedent("""
    from mindspore import nn, ops

    class Pair(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(6, 3)
            self.conv = nn.Conv2d(3, 4, 3)

        def construct(self, feats, img):
            return self.dense(feats), ops.mean(self.conv(img), (2, 3))

    def pair():
        return Pair()
""")


def _keras():
    """Keras, with TensorFlow's C++ logging quieted for this process and the CLI's children
    (the one-line refusals are counted on their stderr)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    return keras


def _two_heads_torch():
    """Two inputs (an image and a sequence of any length), a dict of two outputs."""
    import torch

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.seq = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, image, tokens):
            a = self.conv(image).mean((2, 3))
            b = torch.tanh(self.seq(tokens)).mean(1)
            return {"score": self.head(torch.cat([a, b], 1)), "embed": a + b}

    return TwoHeads()


def _two_heads_keras():
    """NHWC image plus token ids of any length in; a dict of two outputs out."""
    keras = _keras()
    img = keras.Input((8, 8, 3), name="img")
    ids = keras.Input((None,), dtype="int32", name="ids")
    a = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(img))
    b = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 4)(ids))
    cls = keras.layers.Dense(3, name="cls")(keras.layers.Concatenate()([a, b]))
    reg = keras.layers.Dense(1, name="reg")(a)
    return keras.Model([img, ids], {"cls": cls, "reg": reg})


@pytest.fixture(scope="module")
def saved_pytorch(tmp_path_factory):
    import torch

    root = tmp_path_factory.mktemp("user_pt")
    mod = write_module(root, "code", PYTORCH_CODE)
    torch.manual_seed(3)
    small = mod.small().eval()
    torch.jit.script(small).save(str(root / "small.pt"))
    # Known weights for --weights: every parameter 0.25.
    torch.save({k: torch.full_like(v, 0.25) for k, v in small.state_dict().items()}, str(root / "quarter.pt"))
    two = _two_heads_torch().eval()
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    ep = torch.export.export(
        two,
        (torch.randn(2, 3, 12, 12), torch.randn(2, 5, 4)),
        dynamic_shapes=({0: batch}, {0: batch, 1: seq}),
    )
    torch.export.save(ep, str(root / "two.pt2"))
    (root / "junk.bin").write_bytes(b"not a model at all")
    return root


@pytest.fixture(scope="module")
def saved_tensorflow(tmp_path_factory):
    keras = _keras()
    root = tmp_path_factory.mktemp("user_tf")
    keras.utils.set_random_seed(5)
    model = _two_heads_keras()
    model.save(str(root / "mm.keras"))
    model.save(str(root / "mm.h5"))
    model.export(str(root / "mm_saved"), verbose=False)
    (root / "code.py").write_text(KERAS_CODE)
    return root


@pytest.fixture(scope="module")
def saved_mindspore(tmp_path_factory):
    import importlib.util
    import sys

    import mindspore as ms

    root = tmp_path_factory.mktemp("user_ms")
    (root / "pair_net.py").write_text(MINDSPORE_CODE)
    sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("pair_net", root / "pair_net.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pair_net"] = mod
    spec.loader.exec_module(mod)
    net = mod.pair()
    net.set_train(False)
    ms.export(
        net,
        ms.Tensor(np.zeros((2, 6), np.float32)),
        ms.Tensor(np.zeros((2, 3, 8, 8), np.float32)),
        file_name=str(root / "pair"),
        file_format="MINDIR",
    )
    return root


# --- what every framework's models do -----------------------------------------------------

# Code that builds the model: (the file its saved_<framework> fixture wrote, the callable,
# the --shape options, the record's model name).  The Keras model declares its input.
FROM_CODE = {
    "pytorch": ("code.py", "small", ("--shape", "image=1x3x8x8"), "code_small"),
    "tensorflow": ("code.py", "tiny", (), "code_tiny"),
    "mindspore": ("pair_net.py", "pair", ("--shape", "feats=1x6", "--shape", "img=1x3x8x8"), "pair_net_pair"),
}


@pytest.mark.parametrize("framework", frameworks())
def test_a_model_from_code_benches_and_exports_verified(framework, cli, workdir, request):
    saved = request.getfixturevalue(f"saved_{framework}")
    file, func, shapes, name = FROM_CODE[framework]
    code = f"{saved / file}:{func}"
    batches = ("--batch-sizes", "3") if framework == "mindspore" else ()
    out = cli("bench", "--model-from", code, "-b", framework, *shapes, *batches, *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable"), r["error"]
    assert r["framework"] == framework and r["model"] == name
    said = [n for n in r["context"]["notes"] if "runs your code" in n]
    assert out.stderr.count("runs your code") == 1 and said
    if framework == "tensorflow":
        assert r["context"]["inputs"][0]["shape"] == [1, 6, 6, 2]

    # PyTorch's export also loads known weights (every parameter 0.25) by --weights.
    weights = ("--weights", str(saved / "quarter.pt")) if framework == "pytorch" else ()
    onnx_path = workdir / f"{name}.onnx"
    out = cli("export", "--model-from", code, *weights, *shapes, "--out", str(onnx_path), "--json", "e.json")
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "e.json")
    assert rec["status"] == "ok" and rec["context"]["source"]["user"]["model_from"] == code
    import onnx

    g = onnx.load(str(onnx_path)).graph
    if framework == "pytorch":
        from onnx import numpy_helper

        weights = [numpy_helper.to_array(t) for t in g.initializer]
        assert weights and all(np.allclose(w, 0.25) for w in weights if w.size > 1)
    elif framework == "mindspore":
        assert set(rec["metrics"]["verdict"]["outputs"]) == {"output_0", "output_1"}
        assert [i.name for i in g.input] == ["feats", "img"]
        assert all(i.type.tensor_type.shape.dim[0].dim_param == "batch" for i in g.input)


class _Planted:
    """A pickle that runs code: it writes ``marker`` and then yields valid sample inputs, so
    the archive still loads when trusted (the way a real attack would hide)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        code = (
            f"(open({self.marker!r}, 'w').close(), "
            "((__import__('torch').zeros(2, 3, 12, 12), __import__('torch').zeros(2, 5, 4)), {}))[1]"
        )
        return (eval, (code,))


def _pt2_with_a_planted_pickle(saved, workdir, marker):
    """two.pt2 with its sample inputs replaced by a _Planted pickle."""
    import torch

    evil = workdir / "evil.pt2"
    with zipfile.ZipFile(saved / "two.pt2") as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if "/data/sample_inputs/" in item.filename:
                buffer = io.BytesIO()
                torch.save(_Planted(str(marker)), buffer)  # the format torch.export.load reads
                data = buffer.getvalue()
            dst.writestr(item, data)
    return evil


def _savedmodel_that_writes(workdir, marker):
    """A SavedModel whose serving signature writes ``marker``."""
    _keras()
    import tensorflow as tf

    class Writes(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def __call__(self, x):
            tf.io.write_file(str(marker), "written by the model")
            return {"y": x * 2.0}

    m = Writes()
    tf.saved_model.save(m, str(workdir / "writes"), signatures={"serving_default": m.__call__})
    return workdir / "writes"


@pytest.mark.parametrize("framework", frameworks("pytorch", "tensorflow"))
def test_a_model_that_runs_code_when_loaded_needs_trust(framework, cli, workdir, request):
    """dlbench checks the file before loading it and refuses it (one line, exit 2, nothing
    run) unless --trust-model is given; the record says which.  A .pt2: torch.export.load
    retries a sample-inputs pickle without weights_only when the restricted load fails, so
    every pickled member is checked first.  A SavedModel: what the serving signature
    reaches is scanned; the saver every SavedModel carries (SaveV2, never called by
    serving) refuses nothing."""
    marker = workdir / "planted"
    if framework == "pytorch":
        model = _pt2_with_a_planted_pickle(request.getfixturevalue("saved_pytorch"), workdir, marker)
        why = "can run code when loaded"
    else:
        model = _savedmodel_that_writes(workdir, marker)
        why = "WriteFile"
    commands = [["bench", str(model), "-b", framework, *FAST]]
    if framework == "pytorch":
        commands.append(["export", str(model)])
    for command in commands:
        out = cli(*command)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
        assert why in out.stderr and "--trust-model" in out.stderr
        assert not marker.exists()
    out = cli("bench", str(model), "-b", framework, "--trust-model", *FAST, "--json", "t.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker.exists() and only_record(workdir, "t.json")["context"]["model_trust_granted"] is True
    if framework == "tensorflow":
        from dlbench.models.user.tensorflow import savedmodel_risks

        assert savedmodel_risks(str(request.getfixturevalue("saved_tensorflow") / "mm_saved")) == []


@pytest.mark.pytorch
def test_files_of_one_framework_are_probed_in_one_process(saved_pytorch, cli, workdir, monkeypatch):
    """bench probes its user files in one process per framework (each probe imports the
    framework); a file that fails there is probed alone, so its refusal is its own line,
    and a file that runs code when loaded runs none in the shared probe either."""
    from dlbench.harness import usermodel
    from dlbench.harness.cells import launcher
    from dlbench.models.user import sniff

    marker = workdir / "planted"
    evil = _pt2_with_a_planted_pickle(saved_pytorch, workdir, marker)
    launched = []

    def counted(kind, *args, **kwargs):
        launched.append(kind)
        return real(kind, *args, **kwargs)

    real = launcher.run_cell
    monkeypatch.setattr(launcher, "run_cell", counted)
    good, program, bad = (sniff(p) for p in (saved_pytorch / "small.pt", saved_pytorch / "two.pt2", evil))
    usermodel.probe_all([good, program, bad])
    assert launched == ["probe"]
    assert [i["name"] for i in usermodel.probe(program)["inputs"]] == ["image", "tokens"]
    assert [i["name"] for i in usermodel.probe(good)["inputs"]] == ["image"] and launched == ["probe"]
    with pytest.raises(usermodel.UserError, match="--trust-model"):
        usermodel.probe(bad)
    assert launched == ["probe", "probe"] and not marker.exists()
    out = cli("bench", str(saved_pytorch / "two.pt2"), str(evil), "-b", "pytorch", *FAST)
    assert_usage_error(out, "can run code when loaded", "--trust-model")
    assert not marker.exists()


# A saved inference graph: (its file in the saved_<framework> fixture, an objective, what the
# refusal says).
GRAPHS = {
    "tensorflow": ("mm_saved", "classification", ("SavedModel", "not a Keras model to train")),
    "mindspore": ("pair.mindir", "regression", ("MindIR", "cannot train")),
}


@pytest.mark.parametrize("framework", frameworks("tensorflow", "mindspore"))
def test_train_refuses_a_saved_graph(framework, cli, workdir, request):
    path, objective, needles = GRAPHS[framework]
    saved = request.getfixturevalue(f"saved_{framework}")
    assert_usage_error(cli("train", str(saved / path), "--objective", objective), *needles)
    assert not (workdir / "runs").exists()


# --- PyTorch ------------------------------------------------------------------------------


@pytest.mark.pytorch
def test_torchscript_bench_export_and_builds(cli, workdir, saved_pytorch):
    saved = saved_pytorch
    out = cli(
        "bench",
        str(saved / "small.pt"),
        "-b",
        "pytorch",
        "--shape",
        "image=1x3x16x16",
        "--batch-sizes",
        "1,4",
        *FAST,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    recs = json.loads((workdir / "b.json").read_text())
    assert [r["batch_size"] for r in recs] == [1, 4]
    for r in recs:
        assert r["status"] in ("ok", "unstable"), r["error"]
        assert r["model"] == "small" and r["framework"] == "pytorch"
        assert r["context"]["artifact"]["format"] == "pytorch-model"
        assert r["context"]["inputs"][0]["shape"] == [r["batch_size"], 3, 16, 16]
        assert r["context"]["runtime"]["source"]["kind"] == "torchscript"
    assert any("does not record its input shapes" in n for n in recs[0]["context"]["notes"])

    onnx_path = workdir / "small.onnx"
    out = cli(
        "export",
        str(saved / "small.pt"),
        "--shape",
        "image=1x3x16x16",
        "--out",
        str(onnx_path),
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "e.json")
    assert rec["status"] == "ok" and rec["metrics"]["verdict"]["ok"]
    import onnx

    g = onnx.load(str(onnx_path)).graph
    assert [i.name for i in g.input] == ["image"] and [o.name for o in g.output] == ["output"]
    assert g.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"

    for target in ("int8", "fp16"):
        out = cli("build", str(onnx_path), "--to", target, "--json", f"{target}.json")
        assert out.returncode == 0, out.stderr[-3000:]
        assert only_record(workdir, f"{target}.json")["status"] == "ok"


@pytest.mark.pytorch
def test_export_program_with_two_inputs_two_outputs_and_a_dynamic_sequence(cli, workdir, saved_pytorch):
    saved = saved_pytorch
    # No --shape: the sequence takes the length of the program's example inputs (5).
    out = cli(
        "bench", str(saved / "two.pt2"), "-b", "pytorch", "--batch-sizes", "3", *FAST, "--json", "b.json"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable"), r["error"]
    assert r["context"]["model_trust_granted"] is False  # a plain archive needs no trust
    assert [i["shape"] for i in r["context"]["inputs"]] == [[3, 3, 12, 12], [3, 5, 4]]
    assert any("example inputs" in n for n in r["context"]["notes"])

    out = cli(
        "export",
        str(saved / "two.pt2"),
        "--shape",
        "tokens=1x9x4",
        "--out",
        str(workdir / "two.onnx"),
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "e.json")
    assert rec["status"] == "ok"
    assert set(rec["metrics"]["verdict"]["outputs"]) == {"score", "embed"}
    import onnx

    g = onnx.load(str(workdir / "two.onnx")).graph
    assert [i.name for i in g.input] == ["image", "tokens"]
    assert [o.name for o in g.output] == ["score", "embed"]
    seq = g.input[1].type.tensor_type.shape.dim[1]
    assert seq.dim_param and not seq.HasField("dim_value")  # any length, as the model
    # ... and the file runs at a length the export never saw.
    import onnxruntime as ort

    sess = ort.InferenceSession(str(workdir / "two.onnx"))
    score, _ = sess.run(
        None, {"image": np.ones((2, 3, 12, 12), np.float32), "tokens": np.ones((2, 13, 4), np.float32)}
    )
    assert score.shape == (2, 3)


@pytest.mark.pytorch
def test_bad_user_models_are_one_line(cli, workdir, saved_pytorch):
    import datetime

    import torch

    saved = saved_pytorch
    assert_usage_error(cli("bench", str(saved / "quarter.pt"), "-b", "pytorch"), "torch.save pickle")
    assert_usage_error(cli("bench", str(saved / "junk.bin"), "-b", "pytorch"), "no format dlbench knows")
    assert_usage_error(
        cli("bench", str(saved / "small.pt"), "-b", "pytorch"),
        "does not record its input shapes",
        "--shape image=",
    )
    assert_usage_error(
        cli("bench", "--model-from", "no_such_module_here:net", "-b", "pytorch"),
        "cannot import no_such_module_here",
        "ModuleNotFoundError",
    )
    assert_usage_error(
        cli("export", "--model-from", f"{saved / 'code.py'}:broken"), "calling broken() failed", "needs a GPU"
    )
    assert_usage_error(cli("bench", "--model-from", "nocolon", "-b", "pytorch"), "MODULE:CALLABLE")
    assert not list(workdir.glob("*.onnx"))
    # A checkpoint that needs the unrestricted unpickler: dlbench's line, not torch's advice
    # to load it unsafely; the same refusal on every command that takes --weights.
    torch.save({"w": torch.ones(1), "when": datetime.date(2026, 1, 1)}, workdir / "odd.pt")
    code = f"{saved / 'code.py'}:small"
    for command in (["bench", "-b", "pytorch"], ["export"]):
        args = [*command, "--model-from", code, "--weights", str(workdir / "odd.pt")]
        args += ["--shape", "image=1x3x8x8"]
        assert_usage_error(cli(*args), "datetime.date (not a tensor or container)", "--trust-model")


@pytest.mark.pytorch
def test_run_on_a_users_model_exports_builds_and_benches_without_training(cli, workdir, saved_pytorch):
    saved = saved_pytorch
    common = (
        str(saved / "small.pt"),
        "--shape",
        "image=1x3x16x16",
        "--precisions",
        "fp16",
        "--backends",
        "onnxruntime,pytorch",
        "--batch-sizes",
        "2",
        "--iterations",
        "3",
        "--workdir",
        str(workdir / "run"),
    )
    steps = cli("run", *common, "--print-steps")
    assert steps.returncode == 0, steps.stderr[-3000:]
    assert "dlbench train" not in steps.stdout
    assert f"dlbench export {saved / 'small.pt'} --out {workdir / 'run' / 'small.onnx'}" in steps.stdout
    out = cli("run", *common, "-q")
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    stages = {p.stem: json.loads(p.read_text()) for p in (workdir / "run" / "stages").glob("*")}
    assert stages["export-pytorch"]["status"] == "ok"
    assert stages["build-fp16"]["status"] == "ok"
    assert "train-pytorch" not in stages
    con = sqlite3.connect(workdir / "results.sqlite")
    formats = {
        json.loads(c)["artifact"]["format"]
        for (c,) in con.execute("SELECT context FROM records WHERE kind = 'bench'")
    }
    assert formats == {"onnx", "pytorch-model"}


# --- TensorFlow / Keras -------------------------------------------------------------------


@pytest.mark.tensorflow
def test_every_keras_format_benches_in_its_own_layout(cli, workdir, saved_tensorflow):
    saved = saved_tensorflow
    out = cli(
        "bench",
        str(saved / "mm.keras"),
        str(saved / "mm.h5"),
        str(saved / "mm_saved"),
        "-b",
        "tensorflow",
        "--shape",
        "ids=1x6",
        "--batch-sizes",
        "2",
        *FAST,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    recs = json.loads((workdir / "b.json").read_text())
    kinds = {r["context"]["runtime"]["source"]["kind"] for r in recs}
    assert kinds == {"keras", "keras-h5", "savedmodel"}
    for r in recs:
        assert r["status"] in ("ok", "unstable"), r["error"]
        shapes = {i["name"]: i["shape"] for i in r["context"]["inputs"]}
        assert shapes == {"img": [2, 8, 8, 3], "ids": [2, 6]}  # NHWC: as declared
        assert r["context"]["runtime"]["layout"] == "the model's own layout"
        ids = next(i for i in r["context"]["inputs"] if i["name"] == "ids")
        assert ids["dtype"] == "int32"
    # A saved model keeps its float32 policy: bf16 asked is that cell's failure, not fp32
    # measured under a bf16 label.
    out = cli(
        "bench",
        str(saved / "mm.keras"),
        "-b",
        "tensorflow",
        "--precision",
        "bf16",
        "--shape",
        "ids=1x6",
        *FAST,
        "--json",
        "bf16.json",
    )
    assert out.returncode == 1
    r = only_record(workdir, "bf16.json")
    assert r["status"] == "failed" and "keep their own dtype policy" in r["error"]


@pytest.mark.tensorflow
def test_every_keras_format_exports_verified_with_its_own_names(cli, workdir, saved_tensorflow):
    saved = saved_tensorflow
    out = cli(
        "export",
        str(saved / "mm.keras"),
        str(saved / "mm.h5"),
        str(saved / "mm_saved"),
        "--shape",
        "ids=1x5",
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    recs = json.loads((workdir / "e.json").read_text())
    assert len(recs) == 3
    import onnx
    import onnxruntime as ort

    for r in recs:
        assert r["status"] == "ok", r.get("error")
        assert set(r["metrics"]["verdict"]["outputs"]) == {"cls", "reg"}
        path = r["context"]["artifact"]["path"]
        g = onnx.load(path).graph
        assert {i.name for i in g.input} == {"img", "ids"}
        assert {o.name for o in g.output} == {"cls", "reg"}
        assert all(i.type.tensor_type.shape.dim[0].dim_param == "batch" for i in g.input)
        ids = next(i for i in g.input if i.name == "ids").type.tensor_type.shape.dim[1]
        assert not ids.HasField("dim_value")  # any sequence length
        sess = ort.InferenceSession(path)
        feeds = {"img": np.zeros((2, 8, 8, 3), np.float32), "ids": np.ones((2, 11), np.int32)}
        names = [o.name for o in sess.get_outputs()]
        assert dict(zip(names, sess.run(None, feeds)))["cls"].shape == (2, 3)


TRAIN = ("--steps", "6", "--warmup-steps", "1", "--batch-size", "8", "--lr", "0.05")
SUBCLASSED = textwrap.dedent("""
    import keras

    class Sub(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = keras.layers.Dense(16, activation="relu")
            self.out = keras.layers.Dense(3)

        def call(self, x):
            return self.out(self.hidden(x))

    def sub():
        return Sub()
""")


@pytest.mark.tensorflow
def test_train_a_keras_file_and_code(cli, workdir, saved_tensorflow):
    keras = _keras()
    saved = saved_tensorflow
    out = cli(
        "train",
        str(saved / "mm.keras"),
        "--shape",
        "ids=1x6",
        "--int-range",
        "ids=0:50",
        "--objective",
        "classification",
        "--loss-output",
        "cls",
        "--eval",
        *TRAIN,
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "t.json")
    assert r["status"] == "ok", r["error"]
    assert r["framework"] == "tensorflow" and r["model"] == "mm"
    assert r["context"]["identity"]["inputs"] == {"img": [8, 8, 3], "ids": [6]}  # NHWC kept
    user = r["context"]["user_model"]
    assert user["output_shape"] == [3] and {o["name"] for o in user["outputs"]} == {"cls", "reg"}
    assert [f["fill"] for f in user["fills"]] == ["normal", "uniform"]
    losses = r["metrics"]["losses"]
    assert all(np.isfinite(losses)) and min(losses[-3:]) < losses[0], losses
    trained = keras.saving.load_model(str(workdir / "runs" / "mm" / "tensorflow" / "mm.keras"))
    before = keras.saving.load_model(str(saved / "mm.keras"))
    assert not np.allclose(trained.get_layer("cls").kernel.numpy(), before.get_layer("cls").kernel.numpy())

    # A subclassed model has no variables until called: training must still update them.
    (workdir / "sub.py").write_text(SUBCLASSED)
    out = cli(
        "train",
        "--model-from",
        "sub.py:sub",
        "--shape",
        "input=1x10",
        "--objective",
        "regression",
        *TRAIN,
        "--json",
        "r.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "r.json")
    assert r["status"] == "ok", r["error"]
    assert r["context"]["user_model"]["label_shape"] == [3]
    losses = r["metrics"]["losses"]
    assert min(losses[-3:]) < losses[0], losses
    assert (workdir / "runs" / "sub_sub" / "tensorflow" / "model.weights.h5").is_file()


@pytest.mark.tensorflow
def test_train_refuses_amp_on_a_saved_keras_model(cli, workdir, saved_tensorflow):
    # A saved model keeps its float32 policy: amp would be float32 under an amp label.
    assert_usage_error(
        cli(
            "train",
            str(saved_tensorflow / "mm.keras"),
            "--shape",
            "ids=1x6",
            "--objective",
            "regression",
            "--loss-output",
            "reg",
            "--precision",
            "amp",
            *TRAIN,
        ),
        "keep their own dtype policy",
    )
    assert not (workdir / "runs").exists()


def what_tf2onnx_could_not_freeze():
    """The three classes keras.applications models broke on: a Normalization layer's fixed
    mean and variance (captured constants: EfficientNetV2), a grouped convolution (run by
    Keras through an XLA-only function: ConvNeXt's depthwise 7x7) and exact GELU (Erfc)."""
    keras = _keras()
    x = keras.Input((8, 8, 4), name="pixels")
    h = keras.layers.Normalization(mean=[0.5, 0.4, 0.3, 0.2], variance=[0.2, 0.3, 0.4, 0.5])(x)
    h = keras.layers.Conv2D(4, 3, groups=4, padding="same")(h)
    h = keras.layers.Activation(lambda t: keras.activations.gelu(t, approximate=False))(h)
    return keras.Model(x, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(h)))


@pytest.mark.tensorflow
def test_constants_xla_functions_and_erfc_export_whole(cli, workdir):
    keras = _keras()
    keras.utils.set_random_seed(3)
    model = what_tf2onnx_could_not_freeze()
    model.export(str(workdir / "frozen_sm"), verbose=False)
    out = cli("export", str(workdir / "frozen_sm"), "--json", "e.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "e.json")
    assert r["status"] == "ok", r.get("error")
    import onnx

    g = onnx.load(r["context"]["artifact"]["path"]).graph
    assert [i.name for i in g.input] == ["pixels"]  # no constant became an input
    assert not {n.op_type for n in g.node} & {"StatefulPartitionedCall", "PartitionedCall"}
    fixes = " ".join(json.dumps(r["context"]).split("rewrites")[1:])
    assert "Erfc rewritten" in fixes and "XLA-only function marks dropped" in fixes
    assert "convert.from_graph_def (the function frozen)" in r["context"]["export"]["exporter"]


@pytest.mark.tensorflow
def test_a_legacy_h5_keras_cannot_rebuild_is_refused_with_what_to_do(cli, workdir):
    keras = _keras()
    x = keras.Input((4,), name="x")
    model = keras.Model(x, keras.layers.Dense(2)(x + 3.0))  # an op layer with a float argument
    model.save(str(workdir / "legacy.h5"))
    out = cli("bench", str(workdir / "legacy.h5"), "-b", "tensorflow", *FAST)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "cannot rebuild this legacy HDF5 model" in out.stderr and "model.export('DIR')" in out.stderr


# --- MindSpore ----------------------------------------------------------------------------


@pytest.mark.mindspore
def test_mindir_without_sidecar_reads_its_own_inputs(cli, workdir, saved_mindspore):
    saved = saved_mindspore
    assert not list(saved.glob("*.json"))
    out = cli("bench", str(saved / "pair.mindir"), "-b", "mindspore", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable"), r["error"]
    # Exported at batch 2, so fixed at 2: the names and shapes come from the graph itself.
    assert [(i["name"], i["shape"]) for i in r["context"]["inputs"]] == [
        ("feats", [2, 6]),
        ("img", [2, 3, 8, 8]),
    ]
    assert r["batch_size"] == 2
    assert_usage_error(cli("export", str(saved / "pair.mindir")), "not from a MindIR graph")


@pytest.mark.mindspore
def test_train_a_cell_from_code_on_either_output(cli, workdir, saved_mindspore):
    train = (
        "--model-from",
        f"{saved_mindspore / 'pair_net.py'}:pair",
        "--shape",
        "feats=1x6",
        "--shape",
        "img=1x3x8x8",
        "--steps",
        "6",
        "--warmup-steps",
        "1",
        "--batch-size",
        "8",
        "--lr",
        "0.05",
    )
    out = cli("train", *train, "--objective", "classification", "--eval", "--json", "c.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "c.json")
    assert r["status"] == "ok", r["error"]
    assert r["framework"] == "mindspore" and r["context"]["identity"]["loss_output"] == "output_0"
    losses = r["metrics"]["losses"]
    assert all(np.isfinite(losses)) and min(losses[-3:]) < losses[0], losses
    weights = workdir / "runs" / "pair_net_pair" / "mindspore" / "model.ckpt"
    out = cli("train", *train, "--objective", "regression", "--loss-output", "output_1", "--json", "r.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert only_record(workdir, "r.json")["context"]["user_model"]["label_shape"] == [4]
    # The checkpoint carries the Cell's own parameter names: it loads back as --weights.
    out = cli("bench", *train[:6], "--weights", str(weights), "-b", "mindspore", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
