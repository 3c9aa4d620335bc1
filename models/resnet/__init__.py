"""ResNet v1.5 (He et al. 2016, "Deep Residual Learning for Image Recognition",
bottleneck configurations 50 and 152; the stride sits on the bottleneck's 3x3
conv, as in NVIDIA's and MindSpore's ResNet-50 v1.5), written once per
framework in this folder.  v1.5 moves a stride, not a weight: the parameter
counts are torchvision's (25,557,032 and 60,192,808).

The architecture is described here by plain numbers so that parameter and
multiply-add counts are computed without any framework; the per-framework tests
check that every implementation matches these counts, which is how we know the
three networks are the same network.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, register_model

BUILDERS = {
    "pytorch": "dlbench.models.resnet.torch:build",
    "tensorflow": "dlbench.models.resnet.keras:build",
    "mindspore": "dlbench.models.resnet.mindspore:build",
}
EXPANSION = 4


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def walk(cfg: dict):
    """Yield ("conv", cin, cout, k, stride, out_hw) / ("bn", c) / ("pool", ...) /
    ("fc", cin, cout) in network order (models.walkcount); counts below are sums
    over this walk."""
    width, size = cfg["width"], cfg["image_size"]
    size = _conv_out(size, 7, 2, 3)
    yield ("conv", 3, width, 7, 2, size)
    yield ("bn", width)
    yield ("pool", "max", width, 3, 2, 1, size)
    size = _conv_out(size, 3, 2, 1)
    cin = width
    for stage, blocks in enumerate(cfg["layers"]):
        planes = width * 2**stage
        for b in range(blocks):
            stride = 2 if (stage > 0 and b == 0) else 1
            out = _conv_out(size, 3, stride, 1)
            yield ("conv", cin, planes, 1, 1, size)
            yield ("bn", planes)
            yield ("conv", planes, planes, 3, stride, out)
            yield ("bn", planes)
            yield ("conv", planes, planes * EXPANSION, 1, 1, out)
            yield ("bn", planes * EXPANSION)
            if b == 0:
                yield ("conv", cin, planes * EXPANSION, 1, stride, out)
                yield ("bn", planes * EXPANSION)
            cin, size = planes * EXPANSION, out
    yield ("pool", "avg", cin, size, 1, 0, size)
    yield ("fc", cin, cfg["num_classes"])


def parameter_count(spec: ModelSpec) -> int:
    return walkcount.parameters(walk(spec.config))


def multiply_adds(spec: ModelSpec) -> int:
    """Conv and classifier multiply-adds of one sample (see models.walkcount)."""
    return walkcount.multiply_adds(walk(spec.config))


def _resnet(
    name: str,
    display: str,
    *,
    layers,
    width: int,
    image_size: int,
    num_classes: int,
    batch: int,
    dataset: str,
) -> ModelSpec:
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="resnet",
            task="image-classification",
            network_type="CNN",
            dataset=dataset,
            inputs=(InputSpec("input", (3, image_size, image_size)),),
            num_classes=num_classes,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config={
                "layers": tuple(layers),
                "width": width,
                "image_size": image_size,
                "num_classes": num_classes,
            },
            macs_fn=multiply_adds,
            params_fn=parameter_count,
        )
    )


RESNET50 = _resnet(
    "resnet50",
    "ResNet-50 v1.5",
    layers=(3, 4, 6, 3),
    width=64,
    image_size=224,
    num_classes=1000,
    batch=32,
    dataset="ImageNet2012",
)
# Same topology at 1/8 width and 64x64 input: the network tests and quick demos train.
_resnet(
    "resnet50-mini",
    "ResNet-50 v1.5 (1/8 width, 64px)",
    layers=(3, 4, 6, 3),
    width=8,
    image_size=64,
    num_classes=10,
    batch=16,
    dataset="synthetic",
)
# The seed's deeper ResNet: stages of 3, 8, 36 and 3 bottlenecks.
RESNET152 = _resnet(
    "resnet152",
    "ResNet-152 v1.5",
    layers=(3, 8, 36, 3),
    width=64,
    image_size=224,
    num_classes=1000,
    batch=32,
    dataset="ImageNet2012",
)
_resnet(
    "resnet152-mini",
    "ResNet-152 v1.5 (1/8 width, 64px)",
    layers=(3, 8, 36, 3),
    width=8,
    image_size=64,
    num_classes=10,
    batch=16,
    dataset="synthetic",
)
