"""The synthetic network's PyTorch version: the same graph, the same numbers as ONNX Runtime's,
at a batch it was not traced at."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from dlbench.harness.synth import emit
from tests.utils.synthlanes import lanes

pytestmark = pytest.mark.pytorch


def test_the_torchscript_version_computes_what_onnx_runtime_does(tmp_path):
    import onnxruntime as ort
    import torch

    from dlbench.harness.synth.torch_net import convert

    path = tmp_path / "synthetic.onnx"
    onnx.save(emit.network(lanes(), seed=1), str(path))
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
