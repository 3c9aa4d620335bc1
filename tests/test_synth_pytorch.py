"""The synthetic network's PyTorch version: the same graph, the same numbers as ONNX Runtime's,
at a batch it was not traced at."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from dlbench.harness.synth import emit
from dlbench.harness.synth.units import Unit

pytestmark = pytest.mark.pytorch


def _lanes():
    conv = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "group": 1, "activation": "Relu"}
    depthwise = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 16}
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    lstm = {"hidden_size": 8, "direction": "bidirectional"}
    return [
        (Unit("Conv", "convolution", (1, 8, 16, 16), (1, 16, 8, 8), 0, 0, conv), 3),
        (Unit("Conv", "convolution", (1, 16, 8, 8), (1, 16, 8, 8), 0, 0, depthwise), 2),
        (Unit("BatchNormalization", "normalization", (1, 16, 8, 8), (1, 16, 8, 8)), 1),
        (Unit("MaxPool", "pooling", (1, 16, 8, 8), (1, 16, 4, 4), 0, 0, pool), 1),
        (Unit("GlobalAveragePool", "pooling", (1, 16, 4, 4), (1, 16, 1, 1)), 1),
        (Unit("MatMul", "matmul / gemm", (12, 32), (12, 48)), 2),
        (Unit("SkipLayerNormalization", "normalization", (12, 48), (12, 48)), 1),
        (Unit("Softmax", "softmax", (12, 48), (12, 48)), 1),
        (Unit("Gelu", "activation", (12, 48), (12, 48)), 1),
        (Unit("HardSwish", "activation", (12, 48), (12, 48)), 1),
        (Unit("Transpose", "data movement", (12, 48), (12, 48)), 1),
        (Unit("ReduceMean", "reduction", (12, 48), (12, 1), 0, 0, {"axes": [1], "keepdims": 1}), 1),
        (Unit("LSTM", "other", (6, 1, 10), (6, 2, 1, 8), 1, 2, lstm), 1),
        (Unit("GRU", "other", (6, 1, 10), (6, 1, 1, 8), 1, 2, {"hidden_size": 8}), 1),
        (Unit("Gather", "data movement", (2,), (2,), None, None), 2),
    ]


def test_the_torchscript_version_computes_what_onnx_runtime_does(tmp_path):
    import onnxruntime as ort
    import torch

    from dlbench.harness.synth.torch_net import convert

    path = tmp_path / "synthetic.onnx"
    onnx.save(emit.network(_lanes(), seed=1), str(path))
    done = convert(str(path), str(tmp_path / "synthetic.pt"))
    assert done["max_relative_difference"] < 1e-3
    scripted = torch.jit.load(str(tmp_path / "synthetic.pt"))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    width = session.get_inputs()[0].shape[1]
    x = np.random.default_rng(5).standard_normal((5, width)).astype(np.float32)  # traced at 2
    want = session.run(None, {"input": x})
    with torch.no_grad():
        got = scripted(torch.from_numpy(x))
    assert got[0].shape == (5, 1) and got[1].tolist() == [5, width]
    np.testing.assert_allclose(got[0].numpy(), want[0], rtol=1e-3, atol=1e-4)


def test_an_op_it_does_not_know_is_refused_by_name(tmp_path):
    from onnx import TensorProto, helper

    from dlbench.harness.synth.torch_net import build

    graph = helper.make_graph(
        [helper.make_node("Cos", ["input"], ["output"])],
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4])],
    )
    import torch

    with pytest.raises(ValueError, match="Cos: not an op the synthetic network emits"):
        build(helper.make_model(graph))(torch.zeros(1, 4))
