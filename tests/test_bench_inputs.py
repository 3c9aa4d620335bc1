"""Inputs for any ONNX model: shapes, dtypes, embedding ranges, masks; run by real ONNX Runtime."""
import numpy as np
import onnxruntime as ort
import pytest

import benchmodels
from dlbench.harness.bench import inputs, onnxinfo
from dlbench.models.errors import UserError


def _run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _planned(path, batch, shapes=None, int_ranges=None):
    model = onnxinfo.load(path)
    sig, _ = onnxinfo.signature(model)
    return inputs.plan(sig, batch, shapes, int_ranges, onnxinfo.embedding_ranges(model))


def test_int64_tokens_stay_inside_the_embedding_table_and_masks_are_ones(tmp_path):
    path = benchmodels.embedding(tmp_path / "embed.onnx")
    model = onnxinfo.load(path)
    assert onnxinfo.embedding_ranges(model) == {"input_ids": (0, benchmodels.VOCAB),
                                               "token_type_ids": (0, benchmodels.TYPES)}
    # "seq" is set once, through input_ids, for all three inputs
    p = _planned(path, 3, shapes={"input_ids": (1, 40)})
    feeds = inputs.synthesize(p, seed=0)
    assert {k: v.shape for k, v in feeds.items()} == {
        "input_ids": (3, 40), "token_type_ids": (3, 40), "attention_mask": (3, 40)}
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
        inputs.parse_int_range("input_ids=7:7")
    with pytest.raises(UserError, match="expected NAME=LOW:HIGH"):
        inputs.parse_int_range("input_ids=7")


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
    p = _planned(path, 2, shapes={"x": (1, 3, 32, 48)})     # its batch entry is replaced
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
    assert inputs.fixed_batch(sig) == 4
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


@pytest.mark.parametrize("arg,msg", [("x", "expected NAME=DIMxDIMx"), ("x=1x3xy", "integers"),
                                     ("x=1x0x3", "at least 1")])
def test_bad_shape_arguments(arg, msg):
    with pytest.raises(UserError, match=msg):
        inputs.parse_shape(arg)
    assert inputs.parse_shape("input.1=1x3x224x224") == ("input.1", (1, 3, 224, 224))


def test_corrupt_model_and_unknown_operator(tmp_path):
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf\xff\xff")
    with pytest.raises(UserError, match="corrupt.onnx: (not a readable ONNX model|is a text file)"):
        onnxinfo.load(bad)
    with pytest.raises(UserError, match="unknown operator 'FrobnicateTensor'"):
        onnxinfo.load(benchmodels.unknown_op(tmp_path / "op.onnx"))
