"""LeNet-5 (LeCun et al. 1998), modernized the usual way, for 32x32 grey images.

The network: conv 5x5 -> 6, ReLU, 2x2 max pool, conv 5x5 -> 16, ReLU, 2x2 max
pool, flatten (16x5x5 = 400), dense 120, ReLU, dense 84, ReLU, dense 10.

Choices, and why:

* ReLU and max pooling instead of the paper's scaled tanh and trainable
  sub-sampling: what every framework tutorial calls LeNet-5 today, and it
  trains to high accuracy in a few hundred SGD steps.
* No batch norm and no dropout: the network is small enough to train without
  them, the INT8 build then quantizes exactly the convs and dense layers that
  were trained (nothing to fold), and a short run is deterministic.
* The full 5x5 connection between the two conv layers (the paper's C3 used a
  sparse connection table to save 1998's compute; nobody keeps it).
* Input (1, 32, 32): one channel, because the data it checks accuracy on
  (the 8x8 UCI digits dlbench ships, upsampled by ``harness.data.digits``) is grey.
* The flatten is in channels-first order (C, H, W) in every framework.  Keras
  computes channels-last, so its builder transposes the feature map to NCHW
  before flattening (a ``Permute``): the first dense layer then reads its
  inputs in PyTorch's order and ``models.weights`` moves its kernel with the
  plain dense rule (no per-layer permutation of rows).
* Every conv and dense layer starts from PyTorch's default init (uniform in
  +-1/sqrt(fan_in), weights and biases), repeated in the Keras and MindSpore
  builders so the three frameworks start from one distribution.

Layer names are PyTorch's module names (``conv1``, ``conv2``, ``fc1``,
``fc2``, ``fc3``) in every framework, as ``models.weights`` requires.
"""

from __future__ import annotations

import math

from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.lenet.torch:build",
    "tensorflow": "dlbench.models.lenet.keras:build",
    "mindspore": "dlbench.models.lenet.mindspore:build",
}

# (name, input channels, output channels, kernel): "valid" convs, each followed by
# ReLU and a 2x2/2 max pool.
CONVS = (("conv1", 1, 6, 5), ("conv2", 6, 16, 5))
# (name, output features); the last is the classifier (no ReLU after it).
DENSE = (("fc1", 120), ("fc2", 84))
POOL = 2


def walk(cfg: dict):
    """Yield ("conv", name, cin, cout, k, out_hw) and ("fc", name, cin, cout) in order."""
    size = cfg["image_size"]
    channels = cfg["channels"]
    for name, cin, cout, k in cfg["convs"]:
        if cin != channels:
            raise ValueError(f"{name} takes {cin} channels, the previous layer gives {channels}")
        size = size - k + 1
        yield ("conv", name, cin, cout, k, size)
        size //= POOL
        channels = cout
    features = channels * size * size
    for name, width in (*cfg["dense"], ("fc3", cfg["num_classes"])):
        yield ("fc", name, features, width)
        features = width


def feature_map(cfg: dict) -> tuple[int, int, int]:
    """(C, H, W) of the map the flatten reads (16, 5, 5 for 32x32 input)."""
    size, channels = cfg["image_size"], cfg["channels"]
    for _, _, cout, k in cfg["convs"]:
        size, channels = (size - k + 1) // POOL, cout
    return channels, size, size


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder must export."""
    shapes: dict[str, tuple[int, ...]] = {}
    for op in walk(cfg):
        if op[0] == "conv":
            _, name, cin, cout, k, _ = op
            shapes[f"{name}.weight"] = (cout, cin, k, k)
        else:
            _, name, cin, cout = op
            shapes[f"{name}.weight"] = (cout, cin)
        shapes[f"{name}.bias"] = (op[3],)
    return shapes


def parameter_count(spec: ModelSpec) -> int:
    return sum(math.prod(s) for s in canonical_shapes(spec.config).values())


def multiply_adds(spec: ModelSpec) -> int:
    """Conv and dense multiply-adds of one sample (ReLU and pools are element-wise)."""
    total = 0
    for op in walk(spec.config):
        if op[0] == "conv":
            _, _, cin, cout, k, hw = op
            total += hw * hw * k * k * cin * cout
        else:
            total += op[2] * op[3]
    return total


LENET5 = register_model(
    ModelSpec(
        name="lenet5",
        display_name="LeNet-5 (ReLU, max pool; 32x32 grey input)",
        family="lenet",
        task="image-classification",
        network_type="CNN",
        dataset="digits (UCI optdigits)",
        inputs=(InputSpec("input", (1, 32, 32)),),
        num_classes=10,
        default_batch_size=64,
        builders=dict(BUILDERS),
        config={"image_size": 32, "channels": 1, "convs": CONVS, "dense": DENSE, "num_classes": 10},
        macs_fn=multiply_adds,
        params_fn=parameter_count,
        # The digits ship with dlbench: train on them (about 22 epochs) and
        # calibrate INT8 on them, so the accuracy of every file means something.
        run=RunDefaults(
            train_steps=500,
            batch_sizes=(1, 64, 256),
            train_data="digits",
            eval=True,
            learning_rate=0.02,
            calib_data="digits",
        ),
    )
)
