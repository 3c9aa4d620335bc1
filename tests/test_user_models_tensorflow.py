"""A user's own Keras / TensorFlow models (issue 18): .keras, Keras HDF5 and SavedModel files
the test saves, and --model-from code, through bench (native) and export (verified)."""

import json
import os
import textwrap

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras

from tests.utils.clitools import only_record

FAST = ("--iterations", "3", "--warmup", "1", "--max-warmup", "3")

CODE = textwrap.dedent("""
    import keras

    def tiny():
        x = keras.Input((6, 6, 2), name="pixels")
        h = keras.layers.Conv2D(3, 3, activation="relu")(x)
        return keras.Model(x, keras.layers.Dense(4)(keras.layers.Flatten()(h)))
""")


def two_heads() -> keras.Model:
    """NHWC image plus token ids of any length in; a dict of two outputs out."""
    img = keras.Input((8, 8, 3), name="img")
    ids = keras.Input((None,), dtype="int32", name="ids")
    a = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(img))
    b = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 4)(ids))
    cls = keras.layers.Dense(3, name="cls")(keras.layers.Concatenate()([a, b]))
    reg = keras.layers.Dense(1, name="reg")(a)
    return keras.Model([img, ids], {"cls": cls, "reg": reg})


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("user_tf")
    keras.utils.set_random_seed(5)
    model = two_heads()
    model.save(str(root / "mm.keras"))
    model.save(str(root / "mm.h5"))
    model.export(str(root / "mm_saved"), verbose=False)
    (root / "code.py").write_text(CODE)
    return root


def test_every_keras_format_benches_in_its_own_layout(cli, workdir, saved):
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


def test_every_keras_format_exports_verified_with_its_own_names(cli, workdir, saved):
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


def test_keras_model_from_code(cli, workdir, saved):
    code = f"{saved / 'code.py'}:tiny"
    out = cli("bench", "--model-from", code, "-b", "tensorflow", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable") and r["model"] == "code_tiny"
    assert r["context"]["inputs"][0]["shape"] == [1, 6, 6, 2]
    out = cli("export", "--model-from", code, "--out", str(workdir / "tiny.onnx"), "--json", "e.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert only_record(workdir, "e.json")["status"] == "ok"


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


def test_train_a_keras_file_and_code(cli, workdir, saved):
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


def test_train_refuses_what_it_cannot_train_honestly(cli, workdir, saved):
    from tests.utils.clitools import assert_usage_error

    assert_usage_error(
        cli("train", str(saved / "mm_saved"), "--objective", "classification"),
        "SavedModel",
        "not a Keras model to train",
    )
    # A saved model keeps its float32 policy: amp would be float32 under an amp label.
    assert_usage_error(
        cli(
            "train",
            str(saved / "mm.keras"),
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


def what_tf2onnx_could_not_freeze() -> keras.Model:
    """The three classes keras.applications models broke on: a Normalization layer's fixed
    mean and variance (captured constants: EfficientNetV2), a grouped convolution (run by
    Keras through an XLA-only function: ConvNeXt's depthwise 7x7) and exact GELU (Erfc)."""
    x = keras.Input((8, 8, 4), name="pixels")
    h = keras.layers.Normalization(mean=[0.5, 0.4, 0.3, 0.2], variance=[0.2, 0.3, 0.4, 0.5])(x)
    h = keras.layers.Conv2D(4, 3, groups=4, padding="same")(h)
    h = keras.layers.Activation(lambda t: keras.activations.gelu(t, approximate=False))(h)
    return keras.Model(x, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(h)))


def test_constants_xla_functions_and_erfc_export_whole(cli, workdir):
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


def test_a_legacy_h5_keras_cannot_rebuild_is_refused_with_what_to_do(cli, workdir):
    x = keras.Input((4,), name="x")
    model = keras.Model(x, keras.layers.Dense(2)(x + 3.0))  # an op layer with a float argument
    model.save(str(workdir / "legacy.h5"))
    out = cli("bench", str(workdir / "legacy.h5"), "-b", "tensorflow", *FAST)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "cannot rebuild this legacy HDF5 model" in out.stderr and "model.export('DIR')" in out.stderr


def test_a_savedmodel_that_writes_files_needs_trust(cli, workdir, saved):
    """What the serving signature reaches is scanned before loading: a graph that writes a
    file is refused (nothing written) unless --trust-model; the saver every SavedModel
    carries (SaveV2, never called by serving) refuses nothing."""
    import tensorflow as tf

    marker = workdir / "planted"

    class Writes(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def __call__(self, x):
            tf.io.write_file(str(marker), "written by the model")
            return {"y": x * 2.0}

    m = Writes()
    tf.saved_model.save(m, str(workdir / "writes"), signatures={"serving_default": m.__call__})
    out = cli("bench", str(workdir / "writes"), "-b", "tensorflow", *FAST)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert "WriteFile" in out.stderr and "--trust-model" in out.stderr and not marker.exists()
    trusted = ("--trust-model", "--json", "t.json")
    out = cli("bench", str(workdir / "writes"), "-b", "tensorflow", *trusted, *FAST)
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker.exists() and only_record(workdir, "t.json")["context"]["model_trust_granted"] is True
    from dlbench.models.user.tensorflow import savedmodel_risks

    assert savedmodel_risks(str(saved / "mm_saved")) == []
