"""TensorFlow: ``tf.linalg.matmul``, ``conv2d`` and the streams inside one ``tf.function``.

The CPU convolution runs NHWC (TensorFlow's CPU kernels have no NCHW
convolution), so inputs and filters are transposed once, before the clock,
and the result back only for the check.  A ``tf.function`` is what a model
runs; eager dispatch would time Python.  Results are materialized on the
device (``EagerTensor``), never copied to numpy inside the clock.
"""

from __future__ import annotations

import numpy as np

from dlbench.harness.cells import mathmode
from dlbench.harness.micro.engines import TRIAD_SCALAR, Kernel

FRAMEWORK = "tensorflow"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"gemm": ("fp32", "bf16"), "conv": ("fp32", "bf16"), "memory": ("fp32",)}


def build(op, precision, device, inputs, threads) -> Kernel:
    import tensorflow as tf

    threading = tf.config.threading
    threading.set_intra_op_parallelism_threads(threads)
    threading.set_inter_op_parallelism_threads(1)
    math = mathmode.tensorflow_math(tf, device, precision)
    name = "/GPU:0" if device == "cuda" else "/CPU:0"
    if device == "cuda" and not tf.config.list_physical_devices("GPU"):
        raise RuntimeError("TensorFlow sees no GPU")
    dtype = {"fp32": tf.float32, "bf16": tf.bfloat16}[precision]
    arrays = dict(inputs)
    if op.kind == "conv":
        arrays = {
            "x": np.ascontiguousarray(inputs["x"].transpose(0, 2, 3, 1)),
            "w": np.ascontiguousarray(inputs["w"].transpose(2, 3, 1, 0)),
        }
    with tf.device(name):
        t = {k: tf.cast(tf.constant(v), dtype) for k, v in arrays.items()}
    if op.kind == "gemm":
        fn = tf.function(lambda a, b: tf.linalg.matmul(a, b))
        args = (t["a"], t["b"])
    elif op.kind == "conv":
        stride, r = op.dims[6], op.dims[5]
        pad = r // 2
        # Explicit padding: "SAME" pads asymmetrically at stride 2, the other engines don't.
        padding = [[0, 0], [pad, pad], [pad, pad], [0, 0]]
        fn = tf.function(lambda x, w: tf.nn.conv2d(x, w, strides=stride, padding=padding))
        args = (t["x"], t["w"])
    elif op.kernel == "copy":
        fn = tf.function(lambda a: tf.raw_ops.DeepCopy(x=a))
        args = (t["a"],)
    else:
        fn = tf.function(lambda b, c: b + TRIAD_SCALAR * c)
        args = (t["b"], t["c"])
    box = {}

    def step():
        with tf.device(name):
            box["out"] = fn(*args)

    def output():
        out = box["out"]
        if ("GPU" if device == "cuda" else "CPU") not in out.device:
            raise RuntimeError(f"the result is on {out.device}, not {name}")
        got = tf.cast(out, tf.float32).numpy()
        return got.transpose(0, 3, 1, 2) if op.kind == "conv" else got

    notes = ["triad as b + s*c in one tf.function (Grappler may fuse it)"] if op.kernel == "triad" else []
    return Kernel(
        step, output, f"tensorflow {tf.__version__}", "NHWC" if op.kind == "conv" else "", notes, math
    )
