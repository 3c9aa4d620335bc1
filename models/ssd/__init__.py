"""SSD300 (Liu et al. 2016, "SSD: Single Shot MultiBox Detector", ECCV), the released
VOC configuration, written once per framework here.

The backbone is VGG16 configuration D (``models.vgg``'s layer names and init)
cut after ``conv5_3``, with the paper's changes: ``pool3`` rounds up (75 -> 38
at 300px, PyTorch's ``ceil_mode``), ``pool5`` is 3x3 stride 1 pad 1, fc6/fc7
become ``conv6`` (3x3, dilation 6, 1024 channels) and ``conv7`` (1x1, 1024).
Extra layers ``conv8_1``/``conv8_2`` ... ``conv11_1``/``conv11_2`` (1x1 then
3x3; stride 2 pad 1 for conv8_2 and conv9_2, stride 1 pad 0 for conv10_2 and
conv11_2).  ``conv4_3`` is L2-normalized over channels with a learned
per-channel scale (``conv4_3_norm``, initialized to 20).  Six source maps,
38/19/10/5/3/1 at 300px (conv4_3, conv7, conv8_2, conv9_2, conv10_2, conv11_2),
carry 4/6/6/6/4/4 default boxes a cell: 8,732 priors.  Each source has a 3x3
``<source>_loc`` conv (boxes x 4) and ``<source>_conf`` conv (boxes x classes),
21 VOC classes with class 0 the background.  Every conv has a bias and all but
the heads a ReLU: 26,285,486 parameters (ssd.pytorch's count) and 31.4 G
multiply-adds.

Outputs, the raw heads, in ONE tensor ``logits`` of (batch, priors, 4 +
classes): ``[..., :4]`` the box regressions (cx, cy, w, h offsets, variances
0.1/0.2), ``[..., 4:]`` the class scores (pre-softmax).  One output, because
every hop of dlbench (export, verify, INT8/FP16 builds, bench) reads one named
``logits``; verification therefore covers both heads.  The prior order is
(source map, row, column, box) in every framework: each head's NCHW output is
permuted to (row, column, channels) before the reshape, and a head's channels
are box-major (box * 4 + coordinate), as ``boxes.priors`` lays the priors out.

Post-processing (decoding the regressions against the priors, softmax,
per-class NMS) is OUTSIDE the graph, in numpy (``models.ssd.boxes.detect``):
exported models and benchmarks measure the network alone.

``ssd300-mini``: 1/8 width (VGG 8..64, conv6/7 128, extras 32..64 channels) at
268x268, the smallest input for which the paper's padding keeps all six maps
(34/17/9/5/3/1): 7,034 priors, same layers and names.
"""

from __future__ import annotations

from dlbench.models import walkcount
from dlbench.models.registry import InputSpec, ModelSpec, RunDefaults, register_model
from dlbench.models.vgg import VGG16_STAGES

BUILDERS = {
    "pytorch": "dlbench.models.ssd.torch:build",
    "tensorflow": "dlbench.models.ssd.keras:build",
    "mindspore": "dlbench.models.ssd.mindspore:build",
}
OBJECTIVE = "detection"
# (name of the 1x1, name of the 3x3, 1x1 width, 3x3 width, 3x3 stride, 3x3 padding).
EXTRAS = (
    ("conv8_1", "conv8_2", 256, 512, 2, 1),
    ("conv9_1", "conv9_2", 128, 256, 2, 1),
    ("conv10_1", "conv10_2", 128, 256, 1, 0),
    ("conv11_1", "conv11_2", 128, 256, 1, 0),
)
SOURCES = ("conv4_3", "conv7", "conv8_2", "conv9_2", "conv10_2", "conv11_2")
BOXES = (4, 6, 6, 6, 4, 4)
# The released SSD300 VOC model's box sizes as fractions of the input (Caffe's
# min_sizes 30/60/111/162/213/264 and max_sizes 60/111/162/213/264/315 of 300px):
# 0.1 on conv4_3, then 0.2 .. 0.88; the extra square box has side sqrt(min * max).
MIN_SCALES = (0.1, 0.2, 0.37, 0.54, 0.71, 0.88)
MAX_SCALES = (0.2, 0.37, 0.54, 0.71, 0.88, 1.05)
VARIANCES = (0.1, 0.2)
L2NORM_SCALE = 20.0
L2NORM_EPS = 1e-10
DILATION = 6


def ceil_half(n: int) -> int:
    return -(-n // 2)


def backbone(cfg: dict):
    """Yield (name, cin, cout, k, stride, dilation, padding, out_hw) for every non-head
    conv, in order; pools are implied (after conv1_2, conv2_2, conv3_3 (rounding up),
    conv4_3, and the 3x3/1 pool5 after conv5_3)."""
    cin, size = 3, cfg["image_size"]
    for s, widths in enumerate(cfg["stages"], start=1):
        for i, cout in enumerate(widths, start=1):
            yield f"conv{s}_{i}", cin, cout, 3, 1, 1, 1, size
            cin = cout
        if s < 5:
            size = ceil_half(size) if s == 3 else size // 2
    fc = cfg["fc_width"]
    yield "conv6", cin, fc, 3, 1, DILATION, DILATION, size
    yield "conv7", fc, fc, 1, 1, 1, 0, size
    cin = fc
    for name1, name2, mid, out, stride, pad in cfg["extras"]:
        yield name1, cin, mid, 1, 1, 1, 0, size
        size = (size + 2 * pad - 3) // stride + 1
        if size < 1:
            raise ValueError(f"{cfg['image_size']}px input leaves no map at {name2}")
        yield name2, mid, out, 3, stride, 1, pad, size
        cin = out


def sources(cfg: dict) -> list[tuple[str, int, int, int]]:
    """(source name, channels, map side, boxes per cell) of the six prediction maps."""
    convs = {name: (cout, hw) for name, _, cout, _, _, _, _, hw in backbone(cfg)}
    return [(s, *convs[s], a) for s, a in zip(SOURCES, cfg["boxes"])]


def heads(cfg: dict):
    """Yield (name, cin, cout, map side) for the loc and conf convs of each source."""
    for src, c, hw, a in sources(cfg):
        yield f"{src}_loc", c, a * 4, hw
        yield f"{src}_conf", c, a * cfg["num_classes"], hw


def num_priors(cfg: dict) -> int:
    return sum(hw * hw * a for _, _, hw, a in sources(cfg))


def output_shape(cfg: dict) -> tuple[int, int]:
    """Per-sample shape of ``logits``: (priors, 4 + classes)."""
    return num_priors(cfg), 4 + cfg["num_classes"]


def walk(cfg: dict):
    """("conv", cin, cout, k, stride, out_hw) / ("bias", c) in order; the L2Norm's
    per-channel scale is a ("bias", c) too (c parameters, element-wise, no MACs)."""
    for name, cin, cout, k, stride, _, _, hw in backbone(cfg):
        yield ("conv", cin, cout, k, stride, hw)
        yield ("bias", cout)
        if name == "conv4_3":
            yield ("bias", cout)
    for _, cin, cout, hw in heads(cfg):
        yield ("conv", cin, cout, 3, 1, hw)
        yield ("bias", cout)


def canonical_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """The ``models.weights`` names and (PyTorch-layout) shapes every builder exports."""
    shapes: dict[str, tuple[int, ...]] = {}
    convs = [(n, ci, co, k) for n, ci, co, k, *_ in backbone(cfg)]
    convs += [(n, ci, co, 3) for n, ci, co, _ in heads(cfg)]
    for name, cin, cout, k in convs:
        shapes[f"{name}.weight"] = (cout, cin, k, k)
        shapes[f"{name}.bias"] = (cout,)
        if name == "conv4_3":
            shapes["conv4_3_norm.weight"] = (cout,)
    return shapes


def parameter_count(spec: ModelSpec) -> int:
    return walkcount.parameters(walk(spec.config))


def multiply_adds(spec: ModelSpec) -> int:
    return walkcount.multiply_adds(walk(spec.config))


def _ssd(
    name: str, display: str, *, divisor: int, image_size: int, batch: int, dataset: str, run: RunDefaults
) -> ModelSpec:
    stages = tuple(tuple(w // divisor for w in stage) for stage in VGG16_STAGES)
    extras = tuple((a, b, mid // divisor, out // divisor, s, p) for a, b, mid, out, s, p in EXTRAS)
    cfg = {
        "stages": stages,
        "fc_width": 1024 // divisor,
        "extras": extras,
        "image_size": image_size,
        "num_classes": 21,
        "boxes": BOXES,
        "min_scales": MIN_SCALES,
        "max_scales": MAX_SCALES,
        "variances": VARIANCES,
        "iou_threshold": 0.5,
        "neg_pos_ratio": 3,
        # The paper's rate (SGD, momentum 0.9): the mini diverges at 0.01 from the
        # init's first loss of ~40 (0.001: 40.8 -> 15.8 in 5 steps at batch 4).
        "learning_rate": 0.001,
    }
    return register_model(
        ModelSpec(
            name=name,
            display_name=display,
            family="ssd",
            task="object-detection",
            network_type="CNN",
            dataset=dataset,
            inputs=(InputSpec("input", (3, image_size, image_size)),),
            num_classes=21,
            default_batch_size=batch,
            builders=dict(BUILDERS),
            config=cfg,
            macs_fn=multiply_adds,
            params_fn=parameter_count,
            objective=OBJECTIVE,
            run=run,
        )
    )


# 31 G multiply-adds a sample: inference stops at batch 8, as VGG16's.
SSD300 = _ssd(
    "ssd300",
    "SSD300 (VGG16, VOC)",
    divisor=1,
    image_size=300,
    batch=32,
    dataset="PASCAL VOC 2007+2012",
    run=RunDefaults(batch_sizes=(1, 8)),
)
_ssd(
    "ssd300-mini",
    "SSD300 (1/8 width, 268px)",
    divisor=8,
    image_size=268,
    batch=8,
    dataset="synthetic",
    run=RunDefaults(batch_sizes=(1, 8), eval=True),
)
