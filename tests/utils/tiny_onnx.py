"""Small hand-made ONNX models for the converter tests (onnx only, no framework).

``classifier`` is a real little CNN classifier (Conv, Relu, global pool, Gemm)
with seeded weights, NCHW float32 input ``input`` with a symbolic batch and
output ``logits``: everything the verifier and the INT8/FP16 hops need,
at a size that runs in milliseconds.  ``mlp`` is a MatMul network for
dynamic quantization.  ``ocr_classifier``, ``sample_rate`` and ``identity``
are signatures met in the wild, for the bench's input planning.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CLASSES = 5
CHW = (3, 16, 16)


def _init(name: str, array: np.ndarray):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def classifier(
    seed: int = 0, ir_version: int = 8, opset: int = 17, metadata: dict | None = None
) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    c = CHW[0]
    w1 = rng.normal(0, 0.4, (8, c, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 8).astype(np.float32)
    w2 = rng.normal(0, 0.3, (16, 8, 3, 3)).astype(np.float32)
    b2 = rng.normal(0, 0.1, 16).astype(np.float32)
    fc = rng.normal(0, 0.5, (CLASSES, 16)).astype(np.float32)
    fcb = rng.normal(0, 0.1, CLASSES).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *CHW])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        [
            _init("w1", w1),
            _init("b1", b1),
            _init("w2", w2),
            _init("b2", b2),
            _init("fc", fc),
            _init("fcb", fcb),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="dlbench-tests"
    )
    model.ir_version = ir_version
    for key, value in (metadata or {}).items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    onnx.checker.check_model(model, full_check=True)
    return model


def mlp(seed: int = 0, hidden: int = 64, row_bias: bool = False) -> onnx.ModelProto:
    """Flatten + MatMul/Add/Relu + MatMul/Add: what dynamic quantization is for.
    ``row_bias``: the biases as [1, N] rows (some exporters' form), which ONNX Runtime's
    pre-processing fuses into Gemms with 2-D biases."""
    rng = np.random.default_rng(seed)
    d = int(np.prod(CHW))
    w1 = rng.normal(0, 1 / np.sqrt(d), (d, hidden)).astype(np.float32)
    w2 = rng.normal(0, 1 / np.sqrt(hidden), (hidden, CLASSES)).astype(np.float32)
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["hr"]),
        helper.make_node("MatMul", ["hr", "w2"], ["o"]),
        helper.make_node("Add", ["o", "b2"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *CHW])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        [
            _init("w1", w1),
            _init("b1", rng.normal(0, 0.1, (1, hidden) if row_bias else hidden).astype(np.float32)),
            _init("w2", w2),
            _init("b2", rng.normal(0, 0.1, (1, CLASSES) if row_bias else CLASSES).astype(np.float32)),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def scale_initializer(model: onnx.ModelProto, name: str, factor: float) -> onnx.ModelProto:
    """A copy of ``model`` with one weight changed: a deliberately broken conversion."""
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    for i, t in enumerate(broken.graph.initializer):
        if t.name == name:
            broken.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(factor), name)
            )
            return broken
    raise KeyError(name)


def _model(graph, opset: int = 17) -> onnx.ModelProto:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="dlbench-tests"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def ocr_classifier(batch_dim=None, hw=("?", "?")) -> onnx.ModelProto:
    """PP-OCR's text-direction classifier as paddle2onnx declares it: ``x [N, 3, ?, ?]``
    with the same placeholder "?" on height and width (which are not equal), two classes."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Softmax", ["f"], ["softmax_0.tmp_0"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "ocr_cls",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 3, *hw])],
        [helper.make_tensor_value_info("softmax_0.tmp_0", TensorProto.FLOAT, [batch_dim, 2])],
        [_init("w", rng.normal(0, 0.3, (2, 3, 3, 3)).astype(np.float32))],
    )
    return _model(graph)


SAMPLE_RATE = 16000


def sample_rate() -> onnx.ModelProto:
    """Audio with an int64 scalar ``sr`` that must be exactly 16000: the graph reshapes
    16000 zeros to ``[sr]`` (allowzero, so any other value fails the run) and outputs
    ``y = x * (sr == 16000)``, so the value that reached the model shows."""
    nodes = [
        helper.make_node("Unsqueeze", ["sr", "axis0"], ["sr1"]),
        helper.make_node("Reshape", ["zeros", "sr1"], ["buffer"], allowzero=1),
        helper.make_node("ReduceSum", ["buffer"], ["nothing"], keepdims=0),
        helper.make_node("Equal", ["sr", "expected"], ["is16k"]),
        helper.make_node("Cast", ["is16k"], ["ok"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "ok"], ["xs"]),
        helper.make_node("Add", ["xs", "nothing"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "sample_rate",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "samples"]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "samples"])],
        [
            _init("zeros", np.zeros(SAMPLE_RATE, np.float32)),
            _init("axis0", np.array([0], np.int64)),
            _init("expected", np.array(SAMPLE_RATE, np.int64)),
        ],
    )
    return _model(graph)


def identity(width="?") -> onnx.ModelProto:
    """``y = x`` for ``x [batch, width]`` float32: what the model was fed is what comes out."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])],
    )
    return _model(graph)


def fails_at_run(rows: int = 3) -> onnx.ModelProto:
    """A valid graph that fails when run: ``x [batch, 5]`` reshaped to ``[rows, -1]``, which
    5 values do not divide into (``rows`` not a divisor of 5 x batch), so the engine
    stops with its own long error, as a real broken model does."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "fails_at_run",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", CLASSES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
        [_init("shape", np.array([rows, -1], np.int64))],
    )
    return _model(graph)
