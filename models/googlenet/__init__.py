"""GoogLeNet (Inception v1) for 32x32 CIFAR-10 input, written once per framework here.

This is the common CIFAR-10 variant (as in kuangliu/pytorch-cifar, about 6.2 M
parameters) that the PyTorch-vs-MindSpore paper's setting calls for: ImageNet's
7x7/2 stem and its two early max pools would shrink a 32x32 image to 4x4 before
the first inception block, so the stem is one 3x3 conv to 192 channels at full
resolution, followed by inception blocks 3a, 3b, a 3x3/2 max pool, 4a-4e, a
3x3/2 max pool, 5a, 5b, global average pooling and a linear classifier.

Choices, and why:

* Every conv is conv + batch norm + ReLU without a conv bias: a bias followed
  by BN is cancelled by BN's mean subtraction, so it only adds parameters that
  do not change the function (kuangliu's version carries them: 6,166,250
  parameters there, 6,158,346 here: the difference is exactly the 7,904
  conv biases).
* The "5x5" branch is a 1x1 reduction followed by TWO 3x3 convs, as in the
  CIFAR variant (and Inception v2's factorisation): same receptive field as a
  5x5, fewer multiply-adds, and it is the network the paper's 6.2 M-parameter
  CIFAR GoogLeNet refers to.
* No dropout before the classifier (the CIFAR variant has none); this also
  keeps short training runs deterministic across frameworks.
* Every max pool is 3x3 with symmetric padding 1; its inputs are ReLU outputs
  (>= 0), so padding with zeros (Keras) or -inf (PyTorch) gives the same maxima.

Layer names follow torchvision's GoogLeNet (``inception3a.branch2.1.conv``)
in every framework: the weight-transfer tool (``models.weights``) maps layers
across frameworks by name.  The architecture is plain numbers below so that
parameter and multiply-add counts need no framework; the per-framework tests
check every implementation against them.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model

BUILDERS = {
    "pytorch": "dlbench.models.googlenet.torch:build",
    "tensorflow": "dlbench.models.googlenet.keras:build",
    "mindspore": "dlbench.models.googlenet.mindspore:build",
}

# (name, 1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5" (two 3x3), pool projection);
# "pool" is a 3x3/2 max pool.  Szegedy et al. 2015, Table 1.
INCEPTION = (
    ("inception3a", 64, 96, 128, 16, 32, 32),
    ("inception3b", 128, 128, 192, 32, 96, 64),
    "pool",
    ("inception4a", 192, 96, 208, 16, 48, 64),
    ("inception4b", 160, 112, 224, 24, 64, 64),
    ("inception4c", 128, 128, 256, 24, 64, 64),
    ("inception4d", 112, 144, 288, 32, 64, 64),
    ("inception4e", 256, 160, 320, 32, 128, 128),
    "pool",
    ("inception5a", 256, 160, 320, 32, 128, 128),
    ("inception5b", 384, 192, 384, 48, 128, 128),
)
STEM = 192
POOL_NAMES = ("maxpool3", "maxpool4")


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def blocks(cfg: dict):
    """Yield ("stem", cout) / ("inception", name, cin, widths) / ("pool", name) in order."""
    yield ("stem", cfg["stem"])
    cin, pools = cfg["stem"], iter(POOL_NAMES)
    for entry in cfg["inception"]:
        if entry == "pool":
            yield ("pool", next(pools))
            continue
        name, *widths = entry
        yield ("inception", name, cin, tuple(widths))
        cin = widths[0] + widths[2] + widths[4] + widths[5]


def out_channels(widths) -> int:
    n1, _, n3, _, n5, pool = widths
    return n1 + n3 + n5 + pool


def walk(cfg: dict):
    """Yield ("conv", cin, cout, k, stride, out_hw) / ("bn", c) / ("pool", ...) /
    ("fc", cin, cout) in network order (models.walkcount)."""
    size = cfg["image_size"]
    cin = cfg["stem"]
    for block in blocks(cfg):
        if block[0] == "stem":
            yield ("conv", 3, block[1], 3, 1, size)
            yield ("bn", block[1])
        elif block[0] == "pool":
            yield ("pool", "max", cin, 3, 2, 1, size)
            size = _conv_out(size, 3, 2, 1)
        else:
            _, _, cin, (n1, r3, n3, r5, n5, pool) = block
            for a, b, k in (
                (cin, n1, 1),
                (cin, r3, 1),
                (r3, n3, 3),
                (cin, r5, 1),
                (r5, n5, 3),
                (n5, n5, 3),
                ("pool", cin, 3),
                (cin, pool, 1),
            ):
                if a == "pool":  # the pool branch's 3x3/1 window
                    yield ("pool", "max", b, k, 1, 1, size)
                    continue
                yield ("conv", a, b, k, 1, size)
                yield ("bn", b)
            cin = n1 + n3 + n5 + pool
    yield ("pool", "avg", cin, size, 1, 0, size)
    yield ("fc", cin, cfg["num_classes"])


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder must export.

    Spelled out from the block table, independently of any framework, so a
    builder that misnames or reorders a layer fails the per-framework tests
    instead of a weight transfer.
    """
    shapes: dict[str, tuple[int, ...]] = {}

    def conv_bn(name: str, cin: int, cout: int, k: int) -> None:
        shapes[f"{name}.conv.weight"] = (cout, cin, k, k)
        for suffix in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{name}.bn.{suffix}"] = (cout,)

    cin = cfg["stem"]
    for block in blocks(cfg):
        if block[0] == "stem":
            conv_bn("stem", 3, block[1], 3)
        elif block[0] == "inception":
            _, name, cin, (n1, r3, n3, r5, n5, pool) = block
            conv_bn(f"{name}.branch1", cin, n1, 1)
            conv_bn(f"{name}.branch2.0", cin, r3, 1)
            conv_bn(f"{name}.branch2.1", r3, n3, 3)
            conv_bn(f"{name}.branch3.0", cin, r5, 1)
            conv_bn(f"{name}.branch3.1", r5, n5, 3)
            conv_bn(f"{name}.branch3.2", n5, n5, 3)
            conv_bn(f"{name}.branch4.1", cin, pool, 1)
            cin = n1 + n3 + n5 + pool
    shapes["fc.weight"] = (cfg["num_classes"], cin)
    shapes["fc.bias"] = (cfg["num_classes"],)
    return shapes


def parameter_count(spec: ModelSpec) -> int:
    return walkcount.parameters(walk(spec.config))


def multiply_adds(spec: ModelSpec) -> int:
    """Conv and classifier multiply-adds of one sample (see models.walkcount)."""
    return walkcount.multiply_adds(walk(spec.config))


def _scaled(divisor: int):
    return tuple(e if e == "pool" else (e[0], *(w // divisor for w in e[1:])) for e in INCEPTION)


def _googlenet(name: str, display: str, *, divisor: int, batch: int, dataset: str) -> ModelSpec:
    if STEM % divisor or any(w % divisor for e in INCEPTION if e != "pool" for w in e[1:]):
        raise ValueError(f"GoogLeNet widths are not divisible by {divisor}")
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="googlenet",
            task="image-classification",
            network_type="CNN",
            dataset=dataset,
            inputs=(InputSpec("input", (3, 32, 32)),),
            num_classes=10,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config={
                "stem": STEM // divisor,
                "inception": _scaled(divisor),
                "image_size": 32,
                "num_classes": 10,
            },
            macs_fn=multiply_adds,
            params_fn=parameter_count,
            run=RunDefaults(batch_sizes=(1, 32, 128)),  # CIFAR-sized input: larger batches
        )
    )


GOOGLENET = _googlenet(
    "googlenet", "GoogLeNet (Inception v1, CIFAR-10)", divisor=1, batch=128, dataset="CIFAR-10"
)
# Same topology at 1/8 of every width: the network the tests and quick demos train.
_googlenet(
    "googlenet-mini", "GoogLeNet (1/8 width, CIFAR-10 input)", divisor=8, batch=32, dataset="synthetic"
)
