"""Builds of ONNX models that are not one NCHW image input: calibrated and verified on
inputs made from the signature, sized by the shapes a dlbench export recorded."""

import json

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.utils import tiny_onnx
from tests.utils.clitools import assert_usage_error, only_record


def two_inputs() -> onnx.ModelProto:
    """``feats [batch, 4]`` and ``seq [batch, len, 4]`` (any length) -> two outputs."""
    rng = np.random.default_rng(1)
    w = tiny_onnx._init("w", rng.normal(0, 0.5, (4, 3)).astype(np.float32))
    nodes = [
        helper.make_node("MatMul", ["feats", "w"], ["score"]),
        helper.make_node("ReduceMean", ["seq"], ["pooled"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["pooled", "w"], ["summary"]),
    ]
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [
            helper.make_tensor_value_info("feats", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("seq", TensorProto.FLOAT, ["batch", "len", 4]),
        ],
        [
            helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("summary", TensorProto.FLOAT, ["batch", 3]),
        ],
        [w],
    )
    return tiny_onnx._model(graph)


def test_two_inputs_build_from_recorded_shapes(cli, workdir):
    model = two_inputs()
    tiny_onnx.save(model, workdir / "bare.onnx")
    assert_usage_error(
        cli("build", "bare.onnx", "--to", "fp16"), "dynamic dimension 1 ('len')", "dlbench.input_shapes"
    )
    onnx.helper.set_model_props(
        model, {"dlbench.input_shapes": json.dumps({"feats": [1, 4], "seq": [1, 6, 4]})}
    )
    tiny_onnx.save(model, workdir / "two.onnx")
    for target in ("fp16", "int8"):
        out = cli("build", "two.onnx", "--to", target, "--json", f"{target}.json")
        assert out.returncode == 0, out.stderr[-3000:]
        rec = only_record(workdir, f"{target}.json")
        assert rec["status"] == "ok", rec.get("error")
        assert set(rec["metrics"]["verdict"]["outputs"]) == {"score", "summary"}


def test_image_model_with_dynamic_height_and_width_builds_at_recorded_size(cli, workdir):
    model = tiny_onnx.ocr_classifier(batch_dim="N")
    onnx.helper.set_model_props(model, {"dlbench.input_shapes": json.dumps({"x": [1, 3, 20, 12]})})
    tiny_onnx.save(model, workdir / "ocr.onnx")
    out = cli("build", "ocr.onnx", "--to", "fp16", "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert only_record(workdir, "b.json")["status"] == "ok"
