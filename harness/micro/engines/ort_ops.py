"""ONNX Runtime: a one-node graph per op (MatMul, MatMulInteger, Conv, Identity, Mul+Add).

int8 GEMM is MatMulInteger on uint8 activations (with a zero point of 8, so
it computes the same product as the other engines' int8 x int8) and int8
weights: the u8s8 form ONNX Runtime's own quantizer emits, and the one MLAS
has fast kernels for (s8s8 runs several times slower on x86).

The graph is built with ``onnx.helper`` in the cell and run through the CPU
provider (MLAS), or the CUDA provider when asked, which must then be the one
that ran the node.  Feeds are bound once with IO binding, so the clock sees
the kernel, not the copy of the inputs into the session.
"""

from __future__ import annotations

import numpy as np

from dlbench.harness.cells import mathmode
from dlbench.harness.micro.engines import TRIAD_SCALAR, Kernel

FRAMEWORK = "onnxruntime"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"gemm": ("fp32", "int8"), "conv": ("fp32",), "memory": ("fp32",)}
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
U8_ZERO = 8  # int8 operands in [-8, 8) shifted into uint8


def model_of(nodes, name: str, feeds: dict[str, np.ndarray], inits, opset: int, out_type=None):
    """A one-output ONNX model ``y`` over ``feeds`` (their dtypes and shapes) and ``inits``
    (TensorProtos), at ``opset`` with the IR version ONNX Runtime 1.31 reads."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for k, v in feeds.items()
        ],
        [helper.make_tensor_value_info("y", out_type or TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    return model


def bound_session(model, feeds: dict[str, np.ndarray], precision: str, device: str, threads: int):
    """(session, IO binding, math mode, library) for ``model`` with ``feeds`` bound once on
    ``device``; a session that fell back to another provider is refused."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    opts = mathmode.onnxruntime_options(so, precision)
    provider = PROVIDERS[device]
    sess = ort.InferenceSession(
        model.SerializeToString(), so, providers=[(provider, opts)] if device == "cuda" else [provider]
    )
    if sess.get_providers()[0] != provider:
        raise RuntimeError(f"ONNX Runtime {ort.__version__} ran on {sess.get_providers()[0]}, not {provider}")
    binding = sess.io_binding()
    ort_device = "cuda" if device == "cuda" else "cpu"
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, ort_device, 0))
    binding.bind_output("y", ort_device)
    return (
        sess,
        binding,
        mathmode.onnxruntime_math(sess, so, precision),
        f"onnxruntime {ort.__version__} ({provider})",
    )


def _graph(op, precision, inputs):
    from onnx import TensorProto, helper, numpy_helper

    feeds = {k: v for k, v in inputs.items()}
    nodes, inits, out_type = [], [], TensorProto.FLOAT
    if op.kind == "gemm":
        if precision == "int8":
            feeds = {"a": (inputs["a"].astype(np.int16) + U8_ZERO).astype(np.uint8), "b": inputs["b"]}
            inits.append(numpy_helper.from_array(np.array(U8_ZERO, np.uint8), "a_zero"))
            nodes.append(helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["y"]))
            out_type = TensorProto.INT32
        else:
            nodes.append(helper.make_node("MatMul", ["a", "b"], ["y"]))
    elif op.kind == "conv":
        r, s = op.dims[5], op.dims[6]
        nodes.append(
            helper.make_node(
                "Conv", ["x", "w"], ["y"], kernel_shape=[r, r], strides=[s, s], pads=[r // 2] * 4
            )
        )
    elif op.kernel == "copy":
        feeds = {"a": inputs["a"]}
        nodes.append(helper.make_node("Identity", ["a"], ["y"]))
    else:
        feeds = {"b": inputs["b"], "c": inputs["c"]}
        inits.append(numpy_helper.from_array(np.array(TRIAD_SCALAR, np.float32), "s"))
        nodes += [helper.make_node("Mul", ["c", "s"], ["sc"]), helper.make_node("Add", ["b", "sc"], ["y"])]
    return model_of(nodes, op.kind, feeds, inits, 13, out_type), feeds


def build(op, precision, device, inputs, threads) -> Kernel:
    model, feeds = _graph(op, precision, inputs)
    # int8 GEMM: the float32 switches still apply to the session (there are no others).
    sess, binding, math, library = bound_session(model, feeds, "fp32", device, threads)
    notes = ["triad as Mul + Add: two kernels"] if op.kernel == "triad" else []
    return Kernel(
        lambda: sess.run_with_iobinding(binding),
        lambda: binding.get_outputs()[0].numpy(),
        library,
        "NCHW" if op.kind == "conv" else "",
        notes,
        math,
    )
