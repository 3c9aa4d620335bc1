"""Inputs for any ONNX model: shapes, dtypes, embedding ranges, masks; run by real ONNX Runtime."""

import numpy as np
import onnxruntime as ort
import pytest

from dlbench.core import tensors
from dlbench.core.errors import UserError
from dlbench.core.tensors import TensorInfo
from dlbench.harness.bench import input_args, inputs, onnxinfo
from tests.utils import benchmodels, tiny_onnx


def _run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _planned(path, batch, shapes=None, int_ranges=None, given=None):
    model = onnxinfo.load(path)
    sig, _ = onnxinfo.signature(model)
    return inputs.plan(sig, batch, shapes, int_ranges, onnxinfo.embedding_ranges(model), given)


def test_int64_tokens_stay_inside_the_embedding_table_and_masks_are_ones(tmp_path):
    path = benchmodels.embedding(tmp_path / "embed.onnx")
    model = onnxinfo.load(path)
    assert onnxinfo.embedding_ranges(model) == {
        "input_ids": (0, benchmodels.VOCAB),
        "token_type_ids": (0, benchmodels.TYPES),
    }
    # "seq" is set once, through input_ids, for all three inputs
    p = _planned(path, 3, shapes={"input_ids": (1, 40)})
    feeds = inputs.synthesize(p, seed=0)
    assert {k: v.shape for k, v in feeds.items()} == {
        "input_ids": (3, 40),
        "token_type_ids": (3, 40),
        "attention_mask": (3, 40),
    }
    assert feeds["input_ids"].dtype == np.int64 and feeds["token_type_ids"].dtype == np.int32
    ids = feeds["input_ids"]
    assert ids.min() >= 0 and ids.max() < benchmodels.VOCAB and len(np.unique(ids)) > 10
    assert set(np.unique(feeds["token_type_ids"])) <= {0, 1}
    assert (feeds["attention_mask"] == 1).all()
    [out] = _run(path, feeds)
    assert out.shape == (3, 40, benchmodels.HIDDEN) and np.isfinite(out).all()


def test_int_range_overrides_the_graph(tmp_path):
    path = benchmodels.embedding(tmp_path / "embed.onnx")
    p = _planned(path, 2, shapes={"input_ids": (2, 6)}, int_ranges={"input_ids": (5, 7)})
    ids = inputs.synthesize(p)["input_ids"]
    assert set(np.unique(ids)) <= {5, 6}
    with pytest.raises(UserError, match="HIGH must be greater than LOW"):
        input_args.parse_int_range("input_ids=7:7")
    with pytest.raises(UserError, match="expected NAME=LOW:HIGH"):
        input_args.parse_int_range("input_ids=7")


def test_several_inputs_and_outputs_with_a_bool(tmp_path):
    path = benchmodels.two_in_two_out(tmp_path / "two.onnx")
    feeds = inputs.synthesize(_planned(path, 4), seed=1)
    assert set(feeds) == {"a", "b", "flag"} and feeds["flag"].dtype == bool and feeds["flag"].all()
    picked, prod = _run(path, feeds)
    np.testing.assert_allclose(picked, feeds["a"] + feeds["b"], rtol=1e-6)
    np.testing.assert_allclose(prod, feeds["a"] * feeds["b"], rtol=1e-6)


def test_float16_inputs(tmp_path):
    path = benchmodels.half(tmp_path / "half.onnx")
    model = onnxinfo.load(path)
    assert onnxinfo.precision(model) == "fp16"
    feeds = inputs.synthesize(_planned(path, 5))
    assert feeds["x"].dtype == np.float16 and feeds["x"].shape == (5, 16)
    [y] = _run(path, feeds)
    assert y.dtype == np.float16 and y.shape == (5, 4)


def test_dynamic_dimensions_need_a_shape_and_the_batch_follows_batch_sizes(tmp_path):
    path = benchmodels.image_any_size(tmp_path / "any.onnx")
    with pytest.raises(UserError) as err:
        _planned(path, 2)
    msg = str(err.value)
    assert "input 'x' has a dynamic dimension 2 ('height')" in msg
    assert "--shape x=2x3x?x?" in msg
    p = _planned(path, 2, shapes={"x": (1, 3, 32, 48)})  # its batch entry is replaced
    assert p.inputs[0].shape == (2, 3, 32, 48)
    [y] = _run(path, inputs.synthesize(p))
    assert y.shape == (2, 4, 1, 1)
    with pytest.raises(UserError, match=r"3 dimensions given, but input 'x' has 4"):
        _planned(path, 2, shapes={"x": (1, 32, 48)})
    with pytest.raises(UserError, match="dimension 1 is fixed at 3 in the model, got 4"):
        _planned(path, 2, shapes={"x": (1, 4, 32, 48)})
    with pytest.raises(UserError, match="the model has no input 'y'"):
        _planned(path, 2, shapes={"y": (1, 3, 32, 48)})


def test_fixed_batch_runs_its_own_batch_with_a_note(tmp_path):
    path = benchmodels.mlp(tmp_path / "fixed.onnx", batch=4)
    sig, _ = onnxinfo.signature(onnxinfo.load(path))
    assert tensors.fixed_batch(sig) == 4
    p = _planned(path, 1)
    assert p.batch_size == 4 and p.inputs[0].shape == (4, 64)
    assert "fixed at 4" in p.notes[0] and "asked for 1" in p.notes[0]


def test_untraced_integer_input_is_zeros_with_a_note():
    sig = [inputs.TensorInfo("position", "int32", ("N", 3)), inputs.TensorInfo("x", "float64", ("N",))]
    p = inputs.plan(sig, 2)
    feeds = inputs.synthesize(p)
    assert (feeds["position"] == 0).all() and feeds["x"].dtype == np.float64
    assert any("position" in n and "zeros" in n for n in p.notes)
    with pytest.raises(UserError, match="is float64, not an integer"):
        inputs.plan(sig, 2, int_ranges={"x": (0, 2)})
    with pytest.raises(UserError, match="batch size must be at least 1"):
        inputs.plan(sig, 0)


def test_same_seed_same_bytes():
    sig = [inputs.TensorInfo("x", "float32", (None, 3, 4))]
    p = inputs.plan(sig, 2)
    a, b, c = inputs.synthesize(p, 7), inputs.synthesize(p, 7), inputs.synthesize(p, 8)
    assert np.array_equal(a["x"], b["x"]) and not np.array_equal(a["x"], c["x"])


@pytest.mark.parametrize(
    "arg,msg", [("x", "expected NAME=DIMxDIMx"), ("x=1x3xy", "integers"), ("x=1x0x3", "at least 1")]
)
def test_bad_shape_arguments(arg, msg):
    with pytest.raises(UserError, match=msg):
        input_args.parse_shape(arg)
    assert input_args.parse_shape("input.1=1x3x224x224") == ("input.1", (1, 3, 224, 224))


def test_corrupt_model_and_unknown_operator(tmp_path):
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf\xff\xff")
    with pytest.raises(UserError, match="corrupt.onnx: (not a readable ONNX model|is a text file)"):
        onnxinfo.load(bad)
    with pytest.raises(UserError, match="unknown operator 'FrobnicateTensor'"):
        onnxinfo.load(benchmodels.unknown_op(tmp_path / "op.onnx"))


@pytest.mark.parametrize("declared", ["?", "", None, "None", "-1", -1, "unk__613"])
def test_anonymous_dimensions_are_unknowns_of_their_own(declared):
    t = TensorInfo("x", "float32", (declared, 3, declared, np.int64(7), "batch"))
    assert t.shape == (None, 3, None, 7, "batch")
    assert t.describe() == "x [?, 3, ?, 7, batch] float32"


@pytest.mark.parametrize("batch_dim", [None, "None", "?"])
def test_ocr_classifier_heights_and_widths_differ(tmp_path, batch_dim):
    """PP-OCR's classifier: "?" on height and width, 48x192; each "?" is its own unknown."""
    path = tiny_onnx.save(tiny_onnx.ocr_classifier(batch_dim), tmp_path / "cls.onnx")
    p = _planned(path, 2, shapes={"x": (1, 3, 48, 192)})
    assert p.inputs[0].shape == (2, 3, 48, 192)
    [y] = _run(path, inputs.synthesize(p))
    assert y.shape == (2, 2)
    with pytest.raises(UserError) as err:  # no size given: every input listed
        _planned(path, 2)
    assert str(err.value).endswith("; inputs: x [?, 3, ?, ?] float32")
    assert "\n" not in str(err.value)


def test_named_symbols_still_bind_across_inputs(tmp_path):
    path = benchmodels.embedding(tmp_path / "embed.onnx")
    with pytest.raises(UserError) as err:
        _planned(path, 2, shapes={"input_ids": (1, 40), "attention_mask": (1, 30)})
    msg = str(err.value)
    assert "dimension 1 ('seq') is 30, but 'seq' is 40 elsewhere" in msg
    assert msg.endswith(
        "inputs: input_ids [batch, seq] int64, token_type_ids [batch, seq] int32, "
        "attention_mask [batch, seq] int64"
    )


@pytest.mark.parametrize(
    "arg,expected",
    [
        ("x:1x3x48x192", [("x", (1, 3, 48, 192))]),
        ("ids:8x128,mask:8x128", [("ids", (8, 128)), ("mask", (8, 128))]),
        ("serving:0:1x4", [("serving:0", (1, 4))]),  # split at the last ':'
        ("'input:0':1x4,sr:scalar,t:", [("input:0", (1, 4)), ("sr", ()), ("t", ())]),
    ],
)
def test_trtexec_shapes(arg, expected):
    assert input_args.parse_shapes(arg) == expected


def test_shape_spellings_meet_in_one_field():
    assert input_args.shapes_from(["x=1x3x48x192"], ["x:1x3x48x192,sr:scalar"]) == {
        "x": (1, 3, 48, 192),
        "sr": (),
    }
    with pytest.raises(UserError, match="--shape/--shapes x: given twice, as 1x3x48x192 and 1x3x3"):
        input_args.shapes_from(["x=1x3x48x192"], ["x:1x3x32x32"])
    for bad, msg in (("x", "expected NAME:DIMxDIM"), ("x:1xq", "integers"), ("x:0x2", "at least 1")):
        with pytest.raises(UserError, match=msg):
            input_args.parse_shapes(bad)


def test_input_arguments():
    assert input_args.parse_input("sr=16000") == ("sr", 16000)
    assert input_args.parse_input("t=0.5") == ("t", 0.5)
    assert input_args.parse_input("flag=TRUE") == ("flag", True)
    assert input_args.parse_input("x=runs/a=b/x.npy") == ("x", "runs/a=b/x.npy")
    for bad, msg in (
        ("sr", "expected NAME=VALUE"),
        ("sr=", "expected NAME=VALUE"),
        ("t=nan", "not a finite number"),
    ):
        with pytest.raises(UserError, match=msg):
            input_args.parse_input(bad)


def test_a_value_reaches_the_model_in_its_dtype(tmp_path):
    path = tiny_onnx.save(tiny_onnx.sample_rate(), tmp_path / "sr.onnx")
    zeros = _planned(path, 2, shapes={"x": (1, 64)})
    assert zeros.inputs[1].fill == "zeros"
    with pytest.raises(Exception, match="Reshape"):  # the graph refuses any other rate
        _run(path, inputs.synthesize(zeros))
    p = _planned(path, 2, shapes={"x": (1, 64)}, given={"sr": 16000})
    assert p.inputs[1].describe() == {
        "name": "sr",
        "dtype": "int64",
        "shape": [],
        "fill": "value",
        "value": 16000,
    }
    feeds = inputs.synthesize(p)
    assert feeds["sr"].dtype == np.int64 and feeds["sr"].shape == () and feeds["sr"] == 16000
    [y] = _run(path, feeds)
    np.testing.assert_array_equal(y, feeds["x"])  # x * (sr == 16000)
    np.save(tmp_path / "sr.npy", np.array(16000, np.int32))  # 0-d, cast safely
    p = _planned(path, 2, shapes={"x": (1, 64)}, given={"sr": str(tmp_path / "sr.npy")})
    feeds = inputs.synthesize(p)
    assert feeds["sr"].shape == () and feeds["sr"].dtype == np.int64
    np.testing.assert_array_equal(_run(path, feeds)[0], feeds["x"])
    for value, msg in (
        (2**63, "does not fit int64"),
        (0.5, "must be an integer"),
        (True, "true/false is for bool inputs"),
    ):
        with pytest.raises(UserError, match=msg) as err:
            _planned(path, 2, shapes={"x": (1, 64)}, given={"sr": value})
        assert "inputs: x [batch, samples] float32, sr [] int64" in str(err.value)
    with pytest.raises(UserError, match="not exactly representable in float32"):
        _planned(path, 2, shapes={"x": (1, 64)}, given={"x": 16777217})
    with pytest.raises(UserError, match="--input sr and --int-range sr: give one of them"):
        _planned(path, 2, shapes={"x": (1, 64)}, int_ranges={"sr": (0, 2)}, given={"sr": 16000})
    with pytest.raises(UserError, match="the model has no input 'rate'"):
        _planned(path, 2, shapes={"x": (1, 64)}, given={"rate": 16000})


def test_a_file_reaches_the_model_and_its_rows_follow_the_batch(tmp_path):
    path = tiny_onnx.save(tiny_onnx.identity(), tmp_path / "id.onnx")
    rows = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.save(tmp_path / "x.npy", rows)
    f = str(tmp_path / "x.npy")
    for batch, expected, note in (
        (3, rows, None),
        (2, rows[:2], "the first 2 of its 3 rows"),
        (7, rows[[0, 1, 2, 0, 1, 2, 0]], "its 3 rows repeated to batch 7"),
    ):
        p = _planned(path, batch, given={"x": f})  # the file sets the dynamic width
        [y] = _run(path, inputs.synthesize(p))
        np.testing.assert_array_equal(y, expected)
        d = p.inputs[0].describe()
        assert d["fill"] == "file" and d["file"] == f and d["file_shape"] == [3, 5]
        assert len(d["sha256"]) == 64 and d.get("rows") == note
        assert (note is None) == (not p.notes)
    with pytest.raises(UserError, match=r"--shape x=1x6"):  # a --shape that disagrees
        _planned(path, 2, shapes={"x": (1, 6)}, given={"x": f})
    np.save(tmp_path / "wide.npy", rows.astype(np.float64))
    with pytest.raises(UserError, match="float64 does not cast safely to float32"):
        _planned(path, 2, given={"x": str(tmp_path / "wide.npy")})
    np.save(tmp_path / "flat.npy", rows.ravel())
    with pytest.raises(UserError, match=r"the array is 15 \(1 dimensions\), but input 'x' has 2"):
        _planned(path, 2, given={"x": str(tmp_path / "flat.npy")})
    with pytest.raises(UserError, match="no such file"):
        _planned(path, 2, given={"x": str(tmp_path / "missing.npy")})
    np.save(tmp_path / "x.npy", rows + 1)  # changed after planning
    with pytest.raises(UserError, match="the file changed after the sweep was planned"):
        inputs.synthesize(p)


def test_a_file_binds_the_symbols_it_shares(tmp_path):
    path = benchmodels.embedding(tmp_path / "embed.onnx")
    np.save(tmp_path / "ids.npy", np.arange(18, dtype=np.int64).reshape(2, 9) % benchmodels.VOCAB)
    p = _planned(path, 2, given={"input_ids": str(tmp_path / "ids.npy")})
    feeds = inputs.synthesize(p)
    assert feeds["attention_mask"].shape == feeds["token_type_ids"].shape == (2, 9)
    np.testing.assert_array_equal(feeds["input_ids"], np.arange(18).reshape(2, 9))
    np.save(tmp_path / "ids32.npy", np.zeros((2, 9), np.int32))  # int32 -> int64 is safe
    p = _planned(path, 2, given={"input_ids": str(tmp_path / "ids32.npy")})
    assert inputs.synthesize(p)["input_ids"].dtype == np.int64
