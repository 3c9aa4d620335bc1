"""Keras 3 layers on TensorFlow: the layer in a one-layer model with the canonical
weights imported (``models.weights.tensorflow``), run in a ``tf.function``;
images NHWC (transposed before the clock, back for the comparison).  A
strided convolution is ZeroPadding2D + a "valid" one, as Keras' own ResNets
write it: "same" pads asymmetrically at stride 2, which is another layer.  bf16
is Keras' "bfloat16" dtype policy on the layer (weights, input and compute in
bfloat16, as PyTorch's ``.to(bfloat16)``), not mixed precision."""

from __future__ import annotations

import numpy as np

from dlbench.harness.cells import mathmode
from dlbench.harness.micro import layers
from dlbench.harness.micro.engines import Kernel

FRAMEWORK = "tensorflow"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"forward": ("fp32", "bf16"), "train": ("fp32", "bf16")}
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
IMAGES = ("conv", "dwconv", "maxpool", "avgpool", "bn")


def _layers(keras, op, dtype: str) -> list:
    d, k, L = op.dims, op.kernel, keras.layers
    kw = {"name": "layer", "dtype": dtype}
    if k in ("conv", "dwconv"):
        r, s = (d[5], d[6]) if k == "conv" else (d[4], d[5])
        make = (
            (lambda pad: L.Conv2D(d[4], r, strides=s, padding=pad, **kw))
            if k == "conv"
            else (lambda pad: L.DepthwiseConv2D(r, strides=s, padding=pad, **kw))
        )
        return [make("same")] if s == 1 else [L.ZeroPadding2D(r // 2, dtype=dtype), make("valid")]
    if k == "maxpool" and d[6]:  # Keras' "same" pads asymmetrically, and with zeros
        return [_pad(keras, d[6], float("-inf"), dtype), L.MaxPooling2D(d[4], d[5], **kw)]
    return [
        {
            "dense": lambda: L.Dense(d[2], **kw),
            "bn": lambda: L.BatchNormalization(epsilon=layers.EPS, **kw),
            "maxpool": lambda: L.MaxPooling2D(d[4], d[5], **kw),
            "avgpool": lambda: L.AveragePooling2D(d[4], d[5], **kw),
            "layernorm": lambda: L.LayerNormalization(epsilon=layers.EPS, **kw),
            "embedding": lambda: L.Embedding(d[2], d[3], **kw),
            # Weights are imported: the default orthogonal recurrent initializer would only
            # cost a QR, which has no bfloat16 kernel.
            "lstm": lambda: L.LSTM(d[3], return_sequences=True, recurrent_initializer="zeros", **kw),
            "mha": lambda: L.MultiHeadAttention(d[3], d[2] // d[3], **kw),
        }.get(k, lambda: L.Activation(k, **kw))()
    ]


def _pad(keras, p: int, value: float, dtype: str):
    """A layer padding H and W by ``p`` with ``value`` (a max pool's -inf: PyTorch's,
    ONNX's and MindSpore's padded windows ignore the padding)."""

    class Pad(keras.layers.Layer):
        def call(self, x):
            return keras.ops.pad(x, [[0, 0], [p, p], [p, p], [0, 0]], constant_values=value)

    return Pad(dtype=dtype, name="pad")


def _mha_weights(mha, arrays, heads: int) -> None:
    """PyTorch's packed projections (rows q, k, v of in_proj) as Keras' per-head
    EinsumDense kernels: (E_in, heads, head_dim) in, (heads, head_dim, E) out."""
    e = arrays["w_in"].shape[1]
    dh = e // heads
    for n, dense in enumerate((mha.query_dense, mha.key_dense, mha.value_dense)):
        w = arrays["w_in"][n * e : (n + 1) * e]
        dense.kernel.assign(w.T.reshape(e, heads, dh))
        dense.bias.assign(arrays["b_in"][n * e : (n + 1) * e].reshape(heads, dh))
    mha.output_dense.kernel.assign(arrays["w_out"].T.reshape(heads, dh, e))
    mha.output_dense.bias.assign(arrays["b_out"])


def build(op, mode, precision, device, arrays, threads) -> Kernel:
    import keras
    import tensorflow as tf

    from dlbench.models.weights.tensorflow import import_weights

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    math = mathmode.tensorflow_math(tf, device, precision)
    image = op.kernel in IMAGES
    x_np = np.ascontiguousarray(arrays["x"].transpose(0, 2, 3, 1)) if image else arrays["x"]
    cot_np = np.ascontiguousarray(arrays["cot"].transpose(0, 2, 3, 1)) if image else arrays["cot"]
    dtype = DTYPES[precision]
    ids = op.kernel == "embedding"
    inp = keras.Input(x_np.shape[1:], batch_size=x_np.shape[0], dtype="int64" if ids else dtype)
    out = inp
    for lay in _layers(keras, op, dtype):
        out = lay(out, out) if op.kernel == "mha" else lay(out)  # self-attention
    model = keras.Model(inp, out)
    if op.kernel == "mha":
        _mha_weights(model.get_layer("layer"), arrays, op.dims[3])
    else:
        import_weights(model, layers.canonical(op, arrays))
    with tf.device("/GPU:0" if device == "cuda" else "/CPU:0"):
        x = tf.constant(x_np) if ids else tf.cast(tf.constant(x_np), dtype)
        cot = tf.cast(tf.constant(cot_np), dtype)
    layer = model.get_layer("layer")
    box = {}
    if mode == "forward":
        fn = tf.function(lambda x: model(x, training=False))

        def step():
            box["out"] = fn(x)
    else:

        @tf.function
        def fn(x, cot):
            with tf.GradientTape() as tape:
                if op.kernel != "embedding":
                    tape.watch(x)
                out = model(x, training=True)
                loss = tf.reduce_sum(out * cot)
            sources = [x] if op.kernel != "embedding" else []
            grads = tape.gradient(loss, sources + model.trainable_variables)
            return out, tf.convert_to_tensor(grads[0])

        def step():
            box["out"], box["grad"] = fn(x, cot)

    def take(name, to_nchw):
        def get():
            got = box[name].numpy().astype(np.float32)
            return got.transpose(0, 3, 1, 2) if to_nchw else got

        return get

    notes = (
        ["ZeroPadding2D + valid convolution (Keras' own strided form)"]
        if any(isinstance(lay, keras.layers.ZeroPadding2D) for lay in model.layers)
        else []
    )
    notes += (
        ['-inf padding + valid max pool (Keras\' "same" pads with zeros, asymmetrically)']
        if any(lay.name == "pad" for lay in model.layers)
        else []
    )
    return Kernel(
        step,
        take("out", image),
        f"tensorflow {tf.__version__} (keras "
        f"{keras.__version__}, {type(layer).__name__}, "
        f"{layer.dtype_policy.name})",
        "NHWC" if image else "",
        notes,
        math,
        grad=take("grad", image and op.kernel != "embedding") if mode == "train" else None,
    )
