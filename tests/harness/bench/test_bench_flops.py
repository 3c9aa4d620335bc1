"""FLOP counting from ONNX graphs against hand-computed values."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlbench.harness.bench import flops, onnxinfo
from tests.utils import benchmodels


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
    assert c["other_gflops_per_sample"] == pytest.approx(32 / 1e9)  # Relu: one per output
    assert c["uncounted"] == []


def test_grouped_strided_conv_and_batched_matmul():
    conv = helper.make_node("Conv", ["x", "W"], ["c"], group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    mm = helper.make_node("MatMul", ["a", "B"], ["m"])
    model = _model(
        [conv, mm],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 16, 16]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3, 5, 7]),
        ],
        [
            helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("m", TensorProto.FLOAT, None),
        ],
        [_w("W", (6, 2, 3, 3)), _w("B", (7, 9))],
    )
    c = flops.count(model, {"x": (2, 4, 16, 16), "a": (2, 3, 5, 7)}, 2)
    conv_macs = (6 * 8 * 8) * (2 * 3 * 3)  # outputs per sample x (Cin/group x k x k)
    mm_macs = (3 * 5 * 9) * 7  # outputs per sample x contracted dim
    assert c["macs_per_sample"] == conv_macs + mm_macs


def test_transposed_gemm():
    model = _model(
        [helper.make_node("Gemm", ["x", "W"], ["y"], transB=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [_w("W", (3, 10))],
    )
    assert flops.count(model, {"x": (4, 10)}, 4)["macs_per_sample"] == 30


@pytest.mark.pytorch
def test_resnet50_mini_onnx_count_matches_the_zoo(tmp_path):
    """The graph count and the zoo's analytic count are the same convention."""
    import torch

    from dlbench.models.registry import get_model

    spec = get_model("resnet50-mini")
    net = spec.build("pytorch", seed=0).eval()
    path = tmp_path / "mini.onnx"
    torch.onnx.export(
        net,
        torch.zeros(1, 3, 64, 64),
        str(path),
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "N"}},
        opset_version=17,
        dynamo=False,
    )
    model = onnxinfo.load(path)
    c = flops.count(model, {"input": (2, 3, 64, 64)}, 2)
    assert c["macs_per_sample"] == spec.macs_per_sample
    assert c["gflops_per_sample"] == pytest.approx(spec.gflops_per_sample)
    assert c["uncounted"] == []


def _lstm_classifier(cfg):
    """The zoo's LSTM sentiment network as plain ONNX ops, the way the exporters write
    it: embedding Gather, one bidirectional LSTM node per layer, the top layer's
    final states into a Gemm."""
    h, d = cfg["hidden_size"], 2 if cfg["bidirectional"] else 1
    direction = "bidirectional" if d == 2 else "forward"
    nodes = [
        helper.make_node("Gather", ["emb", "input"], ["e"]),
        helper.make_node("Transpose", ["e"], ["x0"], perm=[1, 0, 2]),
    ]
    inits = [
        _w("emb", (cfg["vocab_size"], cfg["embedding_dim"])),
        numpy_helper.from_array(np.array([0, 0, -1], np.int64), "tnd"),
        numpy_helper.from_array(np.array([0, -1], np.int64), "nd"),
    ]
    width = cfg["embedding_dim"]
    for i in range(cfg["num_layers"]):
        inits += [_w(f"W{i}", (d, 4 * h, width)), _w(f"R{i}", (d, 4 * h, h))]
        nodes += [
            helper.make_node(
                "LSTM", [f"x{i}", f"W{i}", f"R{i}"], [f"y{i}", f"h{i}"], hidden_size=h, direction=direction
            ),
            helper.make_node("Transpose", [f"y{i}"], [f"t{i}"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [f"t{i}", "tnd"], [f"x{i + 1}"]),
        ]
        width = d * h
    top = cfg["num_layers"] - 1
    nodes += [
        helper.make_node("Transpose", [f"h{top}"], ["hn"], perm=[1, 0, 2]),
        helper.make_node("Reshape", ["hn", "nd"], ["final"]),
        helper.make_node("Gemm", ["final", "fcW"], ["logits"]),
    ]
    inits.append(_w("fcW", (width, cfg["num_classes"])))
    return _model(
        nodes,
        [helper.make_tensor_value_info("input", TensorProto.INT32, ["N", "T"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
        inits,
    )


@pytest.mark.parametrize("name", ["lstm-tiny", "lstm"])
def test_lstm_graph_count_matches_the_zoo(name):
    """4 gates x hidden x (input + hidden) per step and direction, x sequence x batch."""
    from dlbench.models.registry import get_model

    spec = get_model(name)
    seq = spec.config["seq_len"]
    c = flops.count(_lstm_classifier(spec.config), {"input": (3, seq)}, 3)
    assert c["uncounted"] == []
    assert c["macs_per_sample"] == spec.macs_per_sample
    # Gate activations and state updates: 9 per hidden unit, step and direction.
    cells = spec.config["num_layers"] * 2 * seq * spec.config["hidden_size"]
    assert c["other_gflops_per_sample"] == pytest.approx(9 * cells / 1e9)


def test_dynamically_quantized_lstm_counts_the_same(tmp_path):
    """ONNX has no shape inference for DynamicQuantizeLSTM; the count fills its shapes
    in, so the layers after it (and the quantized classifier) are counted too."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from dlbench.models.registry import get_model

    spec = get_model("lstm-tiny")
    src, dst = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    model = _lstm_classifier(spec.config)
    rng = np.random.default_rng(0)
    for init in model.graph.initializer:  # all-zero weights would quantize to nothing
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(
                numpy_helper.from_array(rng.standard_normal(tuple(init.dims)).astype(np.float32), init.name)
            )
    onnx.save(model, src)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    quantized = onnxinfo.load(dst)
    ops = {n.op_type for n in quantized.graph.node}
    assert "DynamicQuantizeLSTM" in ops and "LSTM" not in ops
    c = flops.count(quantized, {"input": (2, spec.config["seq_len"])}, 2)
    assert c["uncounted"] == []
    assert c["macs_per_sample"] == spec.macs_per_sample


@pytest.mark.parametrize("op,gates,layout", [("GRU", 3, 0), ("RNN", 1, 0), ("LSTM", 4, 1)])
def test_recurrent_ops_by_hand(op, gates, layout):
    seq, batch, cin, hidden = 7, 3, 5, 4
    x_shape = [batch, seq, cin] if layout else [seq, batch, cin]
    node = helper.make_node(op, ["x", "W", "R"], ["y"], hidden_size=hidden, layout=layout)
    model = _model(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [_w("W", (1, gates * hidden, cin)), _w("R", (1, gates * hidden, hidden))],
    )
    c = flops.count(model, {"x": x_shape}, batch)
    assert c["macs_per_sample"] == seq * gates * hidden * (cin + hidden)


def test_a_count_with_unknown_shapes_is_marked_partial_in_the_table(cli, workdir):
    """NonZero's output length is data-dependent: the MatMul after it cannot be counted,
    and the bench table says the figure is a lower bound instead of printing it bare."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("NonZero", ["h"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["t"], perm=[1, 0]),
        helper.make_node("Cast", ["t"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["f", "V"], ["y"]),
    ]
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "W")
    v = numpy_helper.from_array(np.ones((2, 4), np.float32), "V")
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        [w, v],
    )
    c = flops.count(model, {"x": (2, 8)}, 2)
    assert c["macs_per_sample"] == 64 and len(c["uncounted"]) == 1
    import onnx

    onnx.save(model, str(workdir / "nz.onnx"))
    out = cli("bench", "nz.onnx", "-b", "onnxruntime", "--batch-sizes", "2", "--iterations", "3")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "(partial: 1 nodes uncounted)" in out.stdout
