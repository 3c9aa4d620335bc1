"""MindSpore layers: ``mindspore.nn`` cells in PyNative mode with the canonical weights
imported (``models.weights.mindspore``); train is ``value_and_grad`` of
sum(output * cot) over the input and the weights.  Each call waits for its
result (``data_sync``): PyNative dispatches asynchronously."""

from __future__ import annotations

import numpy as np

from dlbench.harness.cells import mathmode
from dlbench.harness.micro import layers
from dlbench.harness.micro.engines import Kernel
from dlbench.harness.micro.engines.ms_ops import set_threads

FRAMEWORK = "mindspore"
DEVICES = ("cpu",)
SUPPORTS = {"forward": ("fp32",), "train": ("fp32",)}
# Why a precision is missing, for the sweep's note: tried on MindSpore 2.8's CPU kernels.
WHY_NOT = {"bf16": "its CPU kernels take no bfloat16 (MatMul, Conv2D, ReLU and BatchNorm refuse it)"}


def _layer(nn, op):
    d, k = op.dims, op.kernel
    return {
        "conv": lambda: nn.Conv2d(
            d[1], d[4], d[5], stride=d[6], pad_mode="pad", padding=d[5] // 2, has_bias=True
        ),
        "dwconv": lambda: nn.Conv2d(
            d[1], d[1], d[4], stride=d[5], pad_mode="pad", padding=d[4] // 2, group=d[1], has_bias=True
        ),
        "dense": lambda: nn.Dense(d[1], d[2]),
        "bn": lambda: nn.BatchNorm2d(d[1], eps=layers.EPS),
        "maxpool": lambda: nn.MaxPool2d(kernel_size=d[4], stride=d[5], pad_mode="pad", padding=d[6]),
        "avgpool": lambda: nn.AvgPool2d(kernel_size=d[4], stride=d[5], pad_mode="valid"),
        "layernorm": lambda: nn.LayerNorm(
            (d[-1],), begin_norm_axis=-1, begin_params_axis=-1, epsilon=layers.EPS
        ),
        "embedding": lambda: nn.Embedding(d[2], d[3]),
        "lstm": lambda: nn.LSTM(d[2], d[3], batch_first=True, has_bias=True),
        "mha": lambda: nn.MultiheadAttention(d[2], d[3], batch_first=True),
        "relu": nn.ReLU,
        "gelu": lambda: nn.GELU(approximate=False),
        "sigmoid": nn.Sigmoid,
        "tanh": nn.Tanh,
    }[k]()


def build(op, mode, precision, device, arrays, threads) -> Kernel:
    import mindspore as ms
    from mindspore import nn, ops

    from dlbench.models.weights.mindspore import import_weights

    ms.set_device("CPU")
    set_threads(ms, threads)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    lstm = op.kernel == "lstm"

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layer = _layer(nn, op)

        def construct(self, x):
            if lstm:
                h0 = ops.zeros((1, x.shape[0], op.dims[3]), ms.float32)
                return self.layer(x, (h0, h0))[0]
            if mha:
                return self.layer(x, x, x, need_weights=False)[0]
            return self.layer(x)

    mha = op.kernel == "mha"
    net = Net()
    weights = layers.canonical(op, arrays)
    if mha:  # its arrays are nn.MultiheadAttention's own parameters, by name
        params = dict(net.parameters_and_names())
        for name, value in weights.items():
            params[name].set_data(ms.Tensor(value))
    else:
        import_weights(net, weights)
    net.set_train(mode == "train")
    x = ms.Tensor(arrays["x"].astype(np.int32) if op.kernel == "embedding" else arrays["x"])
    cot = ms.Tensor(arrays["cot"])
    box = {}
    if mode == "forward":

        def step():
            out = box["out"] = net(x)
            out.data_sync(True)
    else:

        def loss(x):
            return (net(x) * cot).sum()

        params = net.trainable_params()
        embedding = op.kernel == "embedding"
        grad_fn = ms.value_and_grad(loss, grad_position=None if embedding else 0, weights=params)

        def step():
            _, grads = grad_fn(x)
            # (input grad, weight grads), or weight grads alone for an embedding's ids:
            # either way the first is what is compared (the input's, or the table's).
            box["grad"] = grads[0]
            box["grad"].data_sync(True)

    notes = (
        ["train times value_and_grad of sum(out * cot); out is recomputed for the comparison after the clock"]
        if mode == "train"
        else []
    )

    def output():
        if "out" not in box or mode == "train":
            box["out"] = net(x)
        return box["out"].asnumpy()

    return Kernel(
        step,
        output,
        f"mindspore {ms.__version__}",
        "NCHW",
        notes,
        mathmode.mindspore_math(ms, "CPU", precision),
        grad=(lambda: box["grad"].asnumpy()) if mode == "train" else None,
    )
