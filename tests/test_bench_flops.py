"""FLOP counting from ONNX graphs against hand-computed values."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import benchmodels
from harness.bench import flops, onnxinfo


def _model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _w(name, shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def test_gemm_and_relu(tmp_path):
    model = onnxinfo.load(benchmodels.mlp(tmp_path / "m.onnx", din=64, dout=32))
    c = flops.count(model, {"x": (8, 64)}, 8)
    assert c["macs_per_sample"] == 64 * 32
    assert c["gflops_per_sample"] == pytest.approx(2 * 64 * 32 / 1e9)
    assert c["other_gflops_per_sample"] == pytest.approx(32 / 1e9)      # Relu: one per output
    assert c["uncounted"] == []


def test_grouped_strided_conv_and_batched_matmul():
    conv = helper.make_node("Conv", ["x", "W"], ["c"], group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    mm = helper.make_node("MatMul", ["a", "B"], ["m"])
    model = _model(
        [conv, mm],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 16, 16]),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3, 5, 7])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, None)],
        [_w("W", (6, 2, 3, 3)), _w("B", (7, 9))])
    c = flops.count(model, {"x": (2, 4, 16, 16), "a": (2, 3, 5, 7)}, 2)
    conv_macs = (6 * 8 * 8) * (2 * 3 * 3)          # outputs per sample x (Cin/group x k x k)
    mm_macs = (3 * 5 * 9) * 7                       # outputs per sample x contracted dim
    assert c["macs_per_sample"] == conv_macs + mm_macs


def test_transposed_gemm():
    model = _model([helper.make_node("Gemm", ["x", "W"], ["y"], transB=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                   [_w("W", (3, 10))])
    assert flops.count(model, {"x": (4, 10)}, 4)["macs_per_sample"] == 30


@pytest.mark.pytorch
def test_resnet50_mini_onnx_count_matches_the_zoo(tmp_path):
    """The graph count and the zoo's analytic count are the same convention."""
    import torch

    from models.registry import get_model

    spec = get_model("resnet50-mini")
    net = spec.build("pytorch", seed=0).eval()
    path = tmp_path / "mini.onnx"
    torch.onnx.export(net, torch.zeros(1, 3, 64, 64), str(path), input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "N"}}, opset_version=17,
                      dynamo=False)
    model = onnxinfo.load(path)
    c = flops.count(model, {"input": (2, 3, 64, 64)}, 2)
    assert c["macs_per_sample"] == spec.macs_per_sample
    assert c["gflops_per_sample"] == pytest.approx(spec.gflops_per_sample)
    assert c["uncounted"] == []
