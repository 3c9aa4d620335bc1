"""Keras 3 layers on TensorFlow: the layer in a one-layer model with the canonical
weights imported (``models.weights.tensorflow``), run in a ``tf.function``;
images NHWC (transposed before the clock, back for the comparison).  A
strided convolution is ZeroPadding2D + a "valid" one, as Keras' own ResNets
write it: "same" pads asymmetrically at stride 2, which is another layer."""
from __future__ import annotations

import numpy as np

from dlbench.harness import mathmode
from dlbench.harness.micro import layers
from dlbench.harness.micro.engines import Kernel

FRAMEWORK = "tensorflow"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"forward": ("fp32",), "train": ("fp32",)}
IMAGES = ("conv", "dwconv", "maxpool", "avgpool", "bn")


def _layers(keras, op) -> list:
    d, k, L = op.dims, op.kernel, keras.layers
    if k in ("conv", "dwconv"):
        r, s = (d[5], d[6]) if k == "conv" else (d[4], d[5])
        make = (lambda pad: L.Conv2D(d[4], r, strides=s, padding=pad, name="layer")) \
            if k == "conv" else (lambda pad: L.DepthwiseConv2D(r, strides=s, padding=pad,
                                                               name="layer"))
        return [make("same")] if s == 1 else [L.ZeroPadding2D(r // 2), make("valid")]
    return [{
        "dense": lambda: L.Dense(d[2], name="layer"),
        "bn": lambda: L.BatchNormalization(epsilon=layers.EPS, name="layer"),
        "maxpool": lambda: L.MaxPooling2D(d[4], d[5], name="layer"),
        "avgpool": lambda: L.AveragePooling2D(d[4], d[5], name="layer"),
        "layernorm": lambda: L.LayerNormalization(epsilon=layers.EPS, name="layer"),
        "embedding": lambda: L.Embedding(d[2], d[3], name="layer"),
        "lstm": lambda: L.LSTM(d[3], return_sequences=True, name="layer"),
        "mha": lambda: L.MultiHeadAttention(d[3], d[2] // d[3], name="layer"),
    }.get(k, lambda: L.Activation(k, name="layer"))()]


def _mha_weights(mha, arrays, heads: int) -> None:
    """PyTorch's packed projections (rows q, k, v of in_proj) as Keras' per-head
    EinsumDense kernels: (E_in, heads, head_dim) in, (heads, head_dim, E) out."""
    e = arrays["w_in"].shape[1]
    dh = e // heads
    for n, dense in enumerate((mha.query_dense, mha.key_dense, mha.value_dense)):
        w = arrays["w_in"][n * e:(n + 1) * e]
        dense.kernel.assign(w.T.reshape(e, heads, dh))
        dense.bias.assign(arrays["b_in"][n * e:(n + 1) * e].reshape(heads, dh))
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
    inp = keras.Input(x_np.shape[1:], batch_size=x_np.shape[0],
                      dtype="int64" if op.kernel == "embedding" else None)
    out = inp
    for lay in _layers(keras, op):
        out = lay(out, out) if op.kernel == "mha" else lay(out)       # self-attention
    model = keras.Model(inp, out)
    if op.kernel == "mha":
        _mha_weights(model.get_layer("layer"), arrays, op.dims[3])
    else:
        import_weights(model, layers.canonical(op, arrays))
    with tf.device("/GPU:0" if device == "cuda" else "/CPU:0"):
        x, cot = tf.constant(x_np), tf.constant(cot_np)
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
            got = box[name].numpy()
            return got.transpose(0, 3, 1, 2) if to_nchw else got
        return get
    notes = ["ZeroPadding2D + valid convolution (Keras' own strided form)"] \
        if any(isinstance(lay, keras.layers.ZeroPadding2D) for lay in model.layers) else []
    return Kernel(step, take("out", image), f"tensorflow {tf.__version__} (keras "
                  f"{keras.__version__}, {type(layer).__name__})", "NHWC" if image else "",
                  notes, math, grad=take("grad", image and op.kernel != "embedding")
                  if mode == "train" else None)
