"""Every unit op the generator emits, a few instances each: the mix both framework
versions of the synthetic network are tested on (tests/harness/synth/test_synth_frameworks.py)."""

from __future__ import annotations

from dlbench.harness.synth.units import Unit


def lanes():
    conv = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "group": 1, "activation": "Relu"}
    depthwise = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 16}
    # ONNX Runtime's form of a batch norm (its NCHWc pass): a per-channel scale and bias
    per_channel = {"kernel_shape": [1, 1], "group": 16, "activation": "Relu"}
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    lstm = {"hidden_size": 8, "direction": "bidirectional"}
    return [
        (Unit("Conv", "convolution", (1, 8, 16, 16), (1, 16, 8, 8), 0, 0, conv), 3),
        (Unit("Conv", "convolution", (1, 16, 8, 8), (1, 16, 8, 8), 0, 0, depthwise), 2),
        (Unit("Conv", "convolution", (1, 16, 8, 8), (1, 16, 8, 8), 0, 0, per_channel), 2),
        (Unit("BatchNormalization", "normalization", (1, 16, 8, 8), (1, 16, 8, 8)), 1),
        (Unit("MaxPool", "pooling", (1, 16, 8, 8), (1, 16, 4, 4), 0, 0, pool), 1),
        # cropped from an 8x8 map in both spatial axes: a bridge of one two-axis Slice
        (Unit("MaxPool", "pooling", (1, 16, 6, 6), (1, 16, 3, 3), 0, 0, pool), 1),
        (Unit("GlobalAveragePool", "pooling", (1, 16, 4, 4), (1, 16, 1, 1)), 1),
        (Unit("MatMul", "matmul / gemm", (12, 32), (12, 48)), 2),
        (Unit("SkipLayerNormalization", "normalization", (12, 48), (12, 48)), 1),
        (Unit("Softmax", "softmax", (12, 48), (12, 48)), 1),
        (Unit("Gelu", "activation", (12, 48), (12, 48)), 1),
        (Unit("HardSwish", "activation", (12, 48), (12, 48)), 1),
        (Unit("Transpose", "data movement", (12, 48), (12, 48)), 1),
        (Unit("ReduceMean", "reduction", (12, 48), (12, 1), 0, 0, {"axes": [1], "keepdims": 1}), 1),
        # over the last axis of an image's (Keras pools rows of it, whatever the rank)
        (
            Unit("ReduceMean", "reduction", (1, 16, 4, 4), (1, 16, 4, 1), 0, 0, {"axes": [3], "keepdims": 1}),
            1,
        ),
        (Unit("LSTM", "other", (6, 1, 10), (6, 2, 1, 8), 1, 2, lstm), 1),
        (Unit("GRU", "other", (6, 1, 10), (6, 1, 1, 8), 1, 2, {"hidden_size": 8}), 1),
        (Unit("Gather", "data movement", (2,), (2,), None, None), 2),
        (Unit("Add", "elementwise", (2,), (2,), None, None), 1),  # shape arithmetic's other kind
    ]
