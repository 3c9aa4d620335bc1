"""ONNX Runtime layers: the layer as one ONNX node (two for none) with the canonical
weights as initializers, forward only (an inference session has no backward).
The LSTM node takes gates i, o, f, c where PyTorch stacks i, f, g, o, and one
bias of both halves; reordered here, before the graph is made.  Its input is
time-major (the CPU kernel has no batch-first layout): transposed before the
clock, and its output back for the comparison, as TensorFlow's NHWC is."""

from __future__ import annotations

import numpy as np

from dlbench.harness.micro import layers
from dlbench.harness.micro.engines import Kernel
from dlbench.harness.micro.engines.ort_ops import bound_session, model_of

FRAMEWORK = "onnxruntime"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"forward": ("fp32",)}
OPSET = 20  # Gelu is a standard operator from opset 20


def _gates(a: np.ndarray, h: int) -> np.ndarray:
    i, f, g, o = (a[n * h : (n + 1) * h] for n in range(4))
    return np.concatenate([i, o, f, g])


def _node(op, arrays):
    """(nodes, initializers as name -> array, output name)."""
    from onnx import helper

    d, k, a = op.dims, op.kernel, arrays
    if k in ("conv", "dwconv"):
        r, s = (d[5], d[6]) if k == "conv" else (d[4], d[5])
        return [
            helper.make_node(
                "Conv",
                ["x", "w", "b"],
                ["y"],
                kernel_shape=[r, r],
                strides=[s, s],
                pads=[r // 2] * 4,
                group=d[1] if k == "dwconv" else 1,
            )
        ], {"w": a["w"], "b": a["b"]}
    if k == "dense":
        return [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], {"w": a["w"], "b": a["b"]}
    if k == "bn":
        return [
            helper.make_node("BatchNormalization", ["x", "g", "bt", "m", "v"], ["y"], epsilon=layers.EPS)
        ], {"g": a["gamma"], "bt": a["beta"], "m": a["mean"], "v": a["var"]}
    if k in ("maxpool", "avgpool"):
        return [
            helper.make_node(
                "MaxPool" if k == "maxpool" else "AveragePool",
                ["x"],
                ["y"],
                kernel_shape=[d[4]] * 2,
                strides=[d[5]] * 2,
                pads=[d[6]] * 4,
            )
        ], {}
    if k == "layernorm":
        return [
            helper.make_node("LayerNormalization", ["x", "g", "bt"], ["y"], axis=-1, epsilon=layers.EPS)
        ], {"g": a["gamma"], "bt": a["beta"]}
    if k == "embedding":
        return [helper.make_node("Gather", ["table", "x"], ["y"])], {"table": a["table"]}
    if k == "lstm":
        h = d[3]
        bias = np.concatenate([_gates(a["b_ih"], h), _gates(a["b_hh"], h)])[None]
        return [
            helper.make_node("LSTM", ["x", "W", "R", "B"], ["seq"], hidden_size=h),
            helper.make_node("Squeeze", ["seq", "axis"], ["y"]),
        ], {
            "W": _gates(a["w_ih"], h)[None],
            "R": _gates(a["w_hh"], h)[None],
            "B": bias,
            "axis": np.array([1], np.int64),
        }  # (T, 1, B, H) -> (T, B, H)
    if k == "mha":
        return _attention(d, a)
    name = {"relu": "Relu", "gelu": "Gelu", "sigmoid": "Sigmoid", "tanh": "Tanh"}[k]
    return [helper.make_node(name, ["x"], ["y"])], {}


def _attention(d, a):
    """Self-attention in standard operators (ONNX has no attention operator before opset
    23): project, split heads, softmax(q k^T / sqrt(head_dim)) v, merge, project."""
    from onnx import helper

    b, t, e, heads = d
    dh = e // heads
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "w_in_t"], ["qkv0"]),
        node("Add", ["qkv0", "b_in"], ["qkv"]),
        node("Reshape", ["qkv", "split_shape"], ["qkv5"]),  # (B, T, 3, H, dh)
        node("Transpose", ["qkv5"], ["qkvT"], perm=[2, 0, 3, 1, 4]),  # (3, B, H, T, dh)
        node("Split", ["qkvT", "three"], ["q1", "k1", "v1"], axis=0),
        *[node("Squeeze", [f"{n}1", "zero"], [n]) for n in "qkv"],
        node("Transpose", ["k"], ["kT"], perm=[0, 1, 3, 2]),
        node("MatMul", ["q", "kT"], ["s0"]),
        node("Mul", ["s0", "scale"], ["s"]),
        node("Softmax", ["s"], ["p"], axis=-1),
        node("MatMul", ["p", "v"], ["ctx"]),
        node("Transpose", ["ctx"], ["ctxT"], perm=[0, 2, 1, 3]),  # (B, T, H, dh)
        node("Reshape", ["ctxT", "merge_shape"], ["merged"]),
        node("MatMul", ["merged", "w_out_t"], ["y0"]),
        node("Add", ["y0", "b_out"], ["y"]),
    ]
    inits = {
        "w_in_t": np.ascontiguousarray(a["w_in"].T),
        "b_in": a["b_in"],
        "w_out_t": np.ascontiguousarray(a["w_out"].T),
        "b_out": a["b_out"],
        "split_shape": np.array([b, t, 3, heads, dh], np.int64),
        "merge_shape": np.array([b, t, e], np.int64),
        "three": np.array([1, 1, 1], np.int64),
        "zero": np.array([0], np.int64),
        "scale": np.array(dh**-0.5, np.float32),
    }
    return nodes, inits


def build(op, mode, precision, device, arrays, threads) -> Kernel:
    from onnx import numpy_helper

    nodes, inits = _node(op, arrays)
    lstm = op.kernel == "lstm"
    x = np.ascontiguousarray(arrays["x"].transpose(1, 0, 2)) if lstm else arrays["x"]
    model = model_of(
        nodes,
        op.kernel,
        {"x": x},
        [numpy_helper.from_array(np.ascontiguousarray(v), n) for n, v in inits.items()],
        OPSET,
    )
    sess, binding, math, library = bound_session(model, {"x": x}, precision, device, threads)

    def output():
        got = binding.get_outputs()[0].numpy()
        return got.transpose(1, 0, 2) if lstm else got

    return Kernel(
        lambda: sess.run_with_iobinding(binding), output, library, "TNC" if lstm else "NCHW", math=math
    )
