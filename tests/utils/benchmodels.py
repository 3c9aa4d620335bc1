"""Tiny ONNX models built with onnx.helper, one per thing the harness must handle.

Written to a directory by the tests; every model is valid for ONNX Runtime
1.31 (IR version 8, opset 17).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
VOCAB, TYPES, HIDDEN = 50, 2, 8


def _save(graph, path: Path, opset: int = OPSET) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _init(name: str, shape, dtype=np.float32, seed: int = 0):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(dtype), name)


def mlp(path: Path, din: int = 64, dout: int = 32, batch="N") -> Path:
    """Gemm + Relu on a dynamic (or fixed) batch."""
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, din])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, dout])],
        [_init("W", (din, dout)), numpy_helper.from_array(np.zeros(dout, np.float32), "B")],
    )
    return _save(g, path)


def embedding(path: Path) -> Path:
    """Token ids and token types (int64) index embedding tables; a mask multiplies."""
    nodes = [
        helper.make_node("Gather", ["word_table", "input_ids"], ["words"]),
        helper.make_node("Cast", ["token_type_ids"], ["types64"], to=TensorProto.INT64),
        helper.make_node("Gather", ["type_table", "types64"], ["types"]),
        helper.make_node("Add", ["words", "types"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["out"]),
    ]
    g = helper.make_graph(
        nodes,
        "embed",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT32, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        [
            _init("word_table", (VOCAB, HIDDEN)),
            _init("type_table", (TYPES, HIDDEN), seed=1),
            numpy_helper.from_array(np.array([2], np.int64), "axis2"),
        ],
    )
    return _save(g, path)


def half(path: Path) -> Path:
    """A float16 model: fp16 input, weights and output."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "half",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["N", 4])],
        [_init("W", (16, 4), np.float16)],
    )
    return _save(g, path)


def image_any_size(path: Path) -> Path:
    """A conv net whose height and width are dynamic (named dims), as detectors have."""
    g = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("GlobalAveragePool", ["c"], ["y"]),
        ],
        "anysize",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 1, 1])],
        [_init("W", (4, 3, 3, 3))],
    )
    return _save(g, path)


def layer_norm(path: Path, width: int = 16) -> Path:
    """MatMul, LayerNormalization, MatMul: a transformer block's shape, whose rank-1 scale
    ONNX Runtime's quantizer cannot quantize per channel (it says so in its log)."""
    scale = numpy_helper.from_array(
        (1 + 0.1 * np.random.default_rng(1).standard_normal(width)).astype(np.float32), "gamma"
    )
    beta = _init("beta", (width,), seed=2)
    weights = [_init("w1", (width, width)), scale, beta, _init("w2", (width, 4), seed=3)]
    g = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["n"], axis=-1),
            helper.make_node("MatMul", ["n", "w2"], ["y"]),
        ],
        "ln",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        weights,
    )
    return _save(g, path)


def two_in_two_out(path: Path) -> Path:
    """Two float inputs (one with a bool flag), two outputs."""
    g = helper.make_graph(
        [
            helper.make_node("Add", ["a", "b"], ["sum"]),
            helper.make_node("Where", ["flag", "sum", "a"], ["picked"]),
            helper.make_node("Mul", ["a", "b"], ["prod"]),
        ],
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 5]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 5]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, ["N", 5]),
        ],
        [
            helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["N", 5]),
            helper.make_tensor_value_info("prod", TensorProto.FLOAT, ["N", 5]),
        ],
    )
    return _save(g, path)


def unknown_op(path: Path) -> Path:
    g = helper.make_graph(
        [helper.make_node("FrobnicateTensor", ["x"], ["y"])],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
