"""DenseNet-121 (DenseNet-BC), written once per framework in this folder.

Huang, Liu, van der Maaten and Weinberger, "Densely Connected Convolutional
Networks", CVPR 2017, in torchvision's ``densenet121`` configuration: growth
rate k = 32, dense blocks of (6, 12, 24, 16) layers, 64 initial features,
bottleneck width 4k, compression 0.5, no dropout, 224x224 ImageNet input.
Its published size is torchvision's, 7,978,856 parameters and 2.834 G
multiply-adds (the paper's Fig. 3 rounds it to ~2.9 GFLOPs), so that is the
network the counts here are checked against.

Choices, and why:

* "BC" (a 1x1 bottleneck to 4k channels before every 3x3, and transitions
  that halve the channels): it is the variant every published DenseNet-121
  figure refers to; without it the 3x3 convs would read up to 1,000+ channels.
* Pre-activation everywhere (BN -> ReLU -> conv, as in the paper), and hence a
  final BN -> ReLU before the pool: the last block's concatenated output has
  not been normalized by anything yet.
* No conv biases: every channel a conv writes is normalized by a batch norm
  (the next layer's ``bn1``, a transition's ``bn`` or ``final_bn``) before any
  non-linearity, and BN's mean subtraction cancels a per-channel bias.
* A dense layer outputs ``cat([input, new], channels)``, input first: the same
  channel order as torchvision's running list of features, so the channel
  that each ``bn1`` gamma scales is the same in every framework and in a
  torchvision checkpoint (renamed; the names here are not torchvision's).
* Transitions average-pool 2x2/2 without padding (the paper's choice), so
  nothing there depends on a framework's padding convention; the stem's
  3x3/2 max pool pads 1 and follows a ReLU, so zero and -inf padding agree.
* No dropout (torchvision's default ``drop_rate=0``), which also keeps short
  training runs comparable across frameworks; and no gradient checkpointing
  (torchvision's ``memory_efficient``): it re-runs the BN-ReLU-conv1 of every
  layer in the backward pass, and would change what a training step measures.
* Weight init is torchvision's DenseNet init in all three frameworks: conv
  kaiming normal with fan_in (not ResNet's fan_out), BN at the identity, the
  classifier's weight PyTorch's ``nn.Linear`` default and its bias zero.

Layer names are PyTorch module paths (``stem.conv``, ``block2.layer7.conv1``,
``transition3.bn``, ``final_bn``, ``fc``) in every framework: the
weight-transfer tool (``models.weights``) maps layers across frameworks by
name.  The architecture is plain numbers below, so parameter and multiply-add
counts need no framework; the per-framework tests check every implementation
against them.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, register_model

BUILDERS = {
    "pytorch": "dlbench.models.densenet.torch:build",
    "tensorflow": "dlbench.models.densenet.keras:build",
    "mindspore": "dlbench.models.densenet.mindspore:build",
}
BN_SIZE = 4  # bottleneck width, in multiples of the growth rate
COMPRESSION = 2  # a transition keeps 1/COMPRESSION of its channels (theta = 0.5)


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def blocks(cfg: dict):
    """Yield ("block", index, cin, layers) and ("transition", index, cin, cout) in order;
    indices are 1-based, as in the layer names.  A block's output has
    ``cin + layers * growth_rate`` channels."""
    c, k, n = cfg["init_features"], cfg["growth_rate"], len(cfg["blocks"])
    for i, layers in enumerate(cfg["blocks"], start=1):
        yield ("block", i, c, layers)
        c += layers * k
        if i < n:
            yield ("transition", i, c, c // COMPRESSION)
            c //= COMPRESSION


def out_channels(cfg: dict) -> int:
    """Channels after the last block: what ``final_bn`` and the classifier see."""
    c = cfg["init_features"]
    for i, layers in enumerate(cfg["blocks"], start=1):
        c += layers * cfg["growth_rate"]
        if i < len(cfg["blocks"]):
            c //= COMPRESSION
    return c


def walk(cfg: dict):
    """Yield ("conv", cin, cout, k, stride, out_hw) / ("bn", c) / ("pool", ...) /
    ("fc", cin, cout) in network order (models.walkcount); counts below are sums
    over this walk."""
    k, width = cfg["growth_rate"], BN_SIZE * cfg["growth_rate"]
    size = _conv_out(cfg["image_size"], 7, 2, 3)
    yield ("conv", 3, cfg["init_features"], 7, 2, size)
    yield ("bn", cfg["init_features"])
    yield ("pool", "max", cfg["init_features"], 3, 2, 1, size)
    size = _conv_out(size, 3, 2, 1)
    for entry in blocks(cfg):
        if entry[0] == "block":
            _, _, c, layers = entry
            for _ in range(layers):
                yield ("bn", c)
                yield ("conv", c, width, 1, 1, size)
                yield ("bn", width)
                yield ("conv", width, k, 3, 1, size)
                c += k
        else:
            _, _, cin, cout = entry
            yield ("bn", cin)
            yield ("conv", cin, cout, 1, 1, size)
            yield ("pool", "avg", cout, 2, 2, 0, size)
            size = _conv_out(size, 2, 2, 0)
    c = out_channels(cfg)
    yield ("bn", c)
    yield ("pool", "avg", c, size, 1, 0, size)
    yield ("fc", c, cfg["num_classes"])


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder must export.

    Spelled out from the configuration, independently of any framework (and of
    ``walk``), so a builder that misnames a layer or concatenates in the other
    order fails the per-framework tests instead of a weight transfer.
    """
    shapes: dict[str, tuple[int, ...]] = {}

    def bn(name: str, c: int) -> None:
        for suffix in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{name}.{suffix}"] = (c,)

    k = cfg["growth_rate"]
    width = BN_SIZE * k
    c = cfg["init_features"]
    shapes["stem.conv.weight"] = (c, 3, 7, 7)
    bn("stem.bn", c)
    for b, layers in enumerate(cfg["blocks"], start=1):
        for i in range(1, layers + 1):
            prefix = f"block{b}.layer{i}"
            bn(f"{prefix}.bn1", c)
            shapes[f"{prefix}.conv1.weight"] = (width, c, 1, 1)
            bn(f"{prefix}.bn2", width)
            shapes[f"{prefix}.conv2.weight"] = (k, width, 3, 3)
            c += k
        if b < len(cfg["blocks"]):
            bn(f"transition{b}.bn", c)
            shapes[f"transition{b}.conv.weight"] = (c // COMPRESSION, c, 1, 1)
            c //= COMPRESSION
    bn("final_bn", c)
    shapes["fc.weight"] = (cfg["num_classes"], c)
    shapes["fc.bias"] = (cfg["num_classes"],)
    return shapes


def parameter_count(spec: ModelSpec) -> int:
    return walkcount.parameters(walk(spec.config))


def multiply_adds(spec: ModelSpec) -> int:
    """Conv and classifier multiply-adds of one sample (see models.walkcount)."""
    return walkcount.multiply_adds(walk(spec.config))


def _densenet(
    name: str,
    display: str,
    *,
    growth_rate: int,
    init_features: int,
    image_size: int,
    num_classes: int,
    batch: int,
    dataset: str,
) -> ModelSpec:
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="densenet",
            task="image-classification",
            network_type="CNN",
            dataset=dataset,
            inputs=(InputSpec("input", (3, image_size, image_size)),),
            num_classes=num_classes,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config={
                "blocks": (6, 12, 24, 16),
                "growth_rate": growth_rate,
                "init_features": init_features,
                "image_size": image_size,
                "num_classes": num_classes,
            },
            macs_fn=multiply_adds,
            params_fn=parameter_count,
        )
    )


DENSENET121 = _densenet(
    "densenet121",
    "DenseNet-121",
    growth_rate=32,
    init_features=64,
    image_size=224,
    num_classes=1000,
    batch=32,
    dataset="ImageNet2012",
)
# Same 121 layers at 1/4 width and 64x64 input: the network tests and quick demos train.
_densenet(
    "densenet121-mini",
    "DenseNet-121 (1/4 width, 64px)",
    growth_rate=8,
    init_features=16,
    image_size=64,
    num_classes=10,
    batch=16,
    dataset="synthetic",
)
