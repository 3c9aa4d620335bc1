"""VGG16 (Simonyan & Zisserman 2015, "Very Deep Convolutional Networks for
Large-Scale Image Recognition", configuration D), written once per framework here.

Thirteen 3x3 convolutions (stride 1, padding 1, with bias, each followed by a
ReLU) in five stages closed by 2x2/2 max pools, then three fully connected
layers 25088 -> 4096 -> 4096 -> 1000 with ReLU and dropout 0.5 after the first
two: 138,357,544 parameters, as torchvision's ``vgg16``.

Choices, and why:

* No batch norm: configuration D as published and as the AI-benchmark seed's
  VGG16 (torchvision's ``vgg16``, not ``vgg16_bn``), so the convolutions carry
  biases (``walkcount``'s ``("bias", c)`` op).
* No adaptive pool before the classifier: torchvision's ``AdaptiveAvgPool2d(7)``
  is the identity at the 224x224 input the spec declares, and leaving it out
  keeps the exported graph free of a resize that ONNX converters spell
  differently per framework.
* The flatten is in channels-first (C, H, W) order in every framework, as in
  LeNet: Keras permutes its NHWC map first, so ``fc6`` reads its 25,088 inputs
  in PyTorch's order and weights move with the plain dense rule.
* Dropout 0.5 in training, as published: it changes no count and eval-mode
  outputs (what transfer and export compare) do not see it.
* One init in every framework, so the three train from one distribution:
  torchvision's kaiming normal (fan-out) convolutions and zero biases, and dense
  weights N(0, 1/fan_in).  torchvision's dense N(0, 0.01) is that at VGG16's
  widths (0.006 for fc6, 0.016 for fc7 and fc8); at the mini's 128 it would
  shrink the logits ~500x and the mini would not learn in a few hundred steps
  (loss 2.303 -> 2.304 after 60 steps; 2.47 -> 1.41 with fan-in scaling).

Layer names are the paper's Caffe names (``conv1_1`` ... ``conv5_3``, ``fc6``,
``fc7``, ``fc8``) in every framework, as ``models.weights`` requires.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.vgg.torch:build",
    "tensorflow": "dlbench.models.vgg.keras:build",
    "mindspore": "dlbench.models.vgg.mindspore:build",
}
# Convolution widths per stage (configuration D); every stage ends in a 2x2/2 max pool.
VGG16_STAGES = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))
POOL = 2


def convs(cfg: dict):
    """Yield (name, cin, cout, out_hw, closes_stage) for each convolution in order."""
    cin, size = 3, cfg["image_size"]
    for s, widths in enumerate(cfg["stages"], start=1):
        for i, cout in enumerate(widths, start=1):
            yield f"conv{s}_{i}", cin, cout, size, i == len(widths)
            cin = cout
        size //= POOL


def feature_map(cfg: dict) -> tuple[int, int, int]:
    """(C, H, W) of the map the flatten reads (512, 7, 7 for 224x224 input)."""
    size = cfg["image_size"] // POOL ** len(cfg["stages"])
    if size < 1:
        raise ValueError(f"{cfg['image_size']}px input is pooled away by {len(cfg['stages'])} stages")
    return cfg["stages"][-1][-1], size, size


def dense(cfg: dict):
    """Yield (name, cin, cout) for fc6, fc7 and the classifier fc8."""
    c, h, w = feature_map(cfg)
    features = c * h * w
    for name, width in (("fc6", cfg["hidden"]), ("fc7", cfg["hidden"]), ("fc8", cfg["num_classes"])):
        yield name, features, width
        features = width


def walk(cfg: dict):
    """Yield ("conv", cin, cout, 3, 1, out_hw) / ("bias", c) / ("pool", ...) / ("fc", cin,
    cout) in order (models.walkcount)."""
    for _, cin, cout, size, closes in convs(cfg):
        yield ("conv", cin, cout, 3, 1, size)
        yield ("bias", cout)
        if closes:
            yield ("pool", "max", cout, POOL, POOL, 0, size)
    for _, cin, cout in dense(cfg):
        yield ("fc", cin, cout)


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder must export."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, cin, cout, _, _ in convs(cfg):
        shapes[f"{name}.weight"] = (cout, cin, 3, 3)
        shapes[f"{name}.bias"] = (cout,)
    for name, cin, cout in dense(cfg):
        shapes[f"{name}.weight"] = (cout, cin)
        shapes[f"{name}.bias"] = (cout,)
    return shapes


def parameter_count(spec: ModelSpec) -> int:
    return walkcount.parameters(walk(spec.config))


def multiply_adds(spec: ModelSpec) -> int:
    """Conv and dense multiply-adds of one sample (see models.walkcount)."""
    return walkcount.multiply_adds(walk(spec.config))


def _vgg(
    name: str,
    display: str,
    *,
    divisor: int,
    image_size: int,
    hidden: int,
    num_classes: int,
    batch: int,
    dataset: str,
    run: RunDefaults,
) -> ModelSpec:
    stages = tuple(tuple(w // divisor for w in stage) for stage in VGG16_STAGES)
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="vgg",
            task="image-classification",
            network_type="CNN",
            dataset=dataset,
            inputs=(InputSpec("input", (3, image_size, image_size)),),
            num_classes=num_classes,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config={
                "stages": stages,
                "image_size": image_size,
                "hidden": hidden,
                "num_classes": num_classes,
                "dropout": 0.5,
                # torchvision's recipe rate: VGG without BN diverges at the zoo's 0.05.
                "learning_rate": 0.01,
            },
            macs_fn=multiply_adds,
            params_fn=parameter_count,
            run=run,
        )
    )


# 15.5 G multiply-adds a sample, 3.8x ResNet-50's: inference stops at batch 8, where one
# batch already takes about a second on two CPU cores.
VGG16 = _vgg(
    "vgg16",
    "VGG16 (configuration D)",
    divisor=1,
    image_size=224,
    hidden=4096,
    num_classes=1000,
    batch=32,
    dataset="ImageNet2012",
    run=RunDefaults(batch_sizes=(1, 8)),
)
# Same topology at 1/8 width, 64x64 input (a 2x2 map at the flatten, so its order is
# tested) and 128-wide fc6/fc7: the network the tests and quick demos train.
_vgg(
    "vgg16-mini",
    "VGG16 (1/8 width, 64px)",
    divisor=8,
    image_size=64,
    hidden=128,
    num_classes=10,
    batch=16,
    dataset="synthetic",
    run=RunDefaults(),
)
