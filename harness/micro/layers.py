"""The isolated layers ``dlbench layer`` times, and their canonical weights.

A layer is an ``Op`` of kind ``layer`` whose ``kernel`` names the layer type;
its ``dims`` follow the shape the user typed.  Weights are made once per
cell in PyTorch's layout (the canonical one) from the seed, so every engine
runs the same numbers and converts the layout itself; the sweep compares each
engine's output with the first engine's, so a layer benchmark is also an
equivalence check.

Shapes (``--shape``):

* ``conv`` ``NxCxHxW:KkR[sS]`` (padding R//2), ``dwconv`` ``NxCxHxW:kR[sS]``;
* ``dense`` ``BxIxO``; ``lstm`` ``BxTxI:H``; ``embedding`` ``BxT:VxD``;
* ``mha`` ``BxTxE:hHEADS``: self-attention (query = key = value = the input),
  projections with bias, no mask, as PyTorch's ``nn.MultiheadAttention``;
* ``maxpool`` ``NxCxHxW:kR[sS][pP]``, ``avgpool`` ``NxCxHxW:kR[sS]``: a max
  pool's padding is -inf in every engine (Keras pads it explicitly before a
  "valid" pool), so the padded window is one layer everywhere; an average
  pool takes none, since engines disagree on whether padded cells count;
* ``bn`` ``NxCxHxW``; ``layernorm`` ``BxTxD``; ``relu``, ``gelu``,
  ``sigmoid``, ``tanh`` any ``AxBx...``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.micro.ops import ITEMSIZE, Op

ACTIVATIONS = ("relu", "gelu", "sigmoid", "tanh")
TYPES = (
    "conv",
    "dwconv",
    "dense",
    "bn",
    "maxpool",
    "avgpool",
    "layernorm",
    "embedding",
    "lstm",
    "mha",
    *ACTIVATIONS,
)
MODES = ("forward", "train")  # train: forward + backward (input and weight grads)
EPS = 1e-5  # batch and layer norm, the same in every engine
_POOL = r"(\d+)x(\d+)x(\d+)x(\d+):k(\d+)(?:s(\d+))?(?:p(\d+))?"
_FORMS = {
    "conv": (r"(\d+)x(\d+)x(\d+)x(\d+):(\d+)k(\d+)(?:s(\d+))?", "NxCxHxW:KkR[sS]"),
    "dwconv": (r"(\d+)x(\d+)x(\d+)x(\d+):k(\d+)(?:s(\d+))?", "NxCxHxW:kR[sS]"),
    "maxpool": (_POOL, "NxCxHxW:kR[sS][pP]"),
    "avgpool": (_POOL, "NxCxHxW:kR[sS]"),
    "dense": (r"(\d+)x(\d+)x(\d+)", "BxIxO"),
    "lstm": (r"(\d+)x(\d+)x(\d+):(\d+)", "BxTxI:H"),
    "mha": (r"(\d+)x(\d+)x(\d+):h(\d+)", "BxTxE:hHEADS"),
    "embedding": (r"(\d+)x(\d+):(\d+)x(\d+)", "BxT:VxD"),
    "bn": (r"(\d+)x(\d+)x(\d+)x(\d+)", "NxCxHxW"),
    "layernorm": (r"(\d+)x(\d+)x(\d+)", "BxTxD"),
}
_ANY = (r"(\d+(?:x\d+)*)", "AxBx...")


@dataclass(frozen=True)
class Layer(Op):
    """An ``Op`` of kind ``layer``: its ``kernel`` is the layer type."""

    @property
    def label(self) -> str:
        return label(self)

    def flops(self) -> int:
        return flops(self)

    def bytes_moved(self, precision: str) -> int:
        return bytes_moved(self, ITEMSIZE[precision])


def parse(kind: str, text: str) -> Layer:
    if kind not in TYPES:
        raise UserError(f"unknown layer {kind!r} (choose from {', '.join(TYPES)})")
    pattern, form = _FORMS.get(kind, _ANY)
    m = re.fullmatch(pattern, text.strip().lower())
    if not m:
        raise UserError(f"--shape {text!r}: a {kind} layer is {form}")
    if kind in ACTIVATIONS:
        dims = tuple(int(d) for d in m[1].split("x"))
    else:
        defaults = {"conv": "1", "dwconv": "1", "maxpool": None, "avgpool": None}
        dims = tuple(int(g) for g in m.groups(default=defaults.get(kind) or "0"))
        if kind in ("maxpool", "avgpool") and dims[5] == 0:  # stride defaults to the window
            dims = dims[:5] + (dims[4],) + dims[6:]
    op = Layer("layer", dims, kind)
    if kind == "avgpool" and dims[6]:
        raise UserError(
            f"--shape {text!r}: an avgpool takes no padding (engines disagree on "
            f"whether padded cells count in the average)"
        )
    if kind == "maxpool" and 2 * dims[6] > dims[4]:
        raise UserError(f"--shape {text!r}: padding must be at most half the window")
    if min(dims[:6]) <= 0 or min(out_shape(op)) <= 0:
        raise UserError(f"--shape {text!r}: every size must be positive and the window must fit the input")
    return op


def label(op: Op) -> str:
    d = op.dims
    if op.kernel == "conv":
        text = f"{d[0]}x{d[1]}x{d[2]}x{d[3]}:{d[4]}k{d[5]}" + (f"s{d[6]}" if d[6] != 1 else "")
    elif op.kernel in ("dwconv", "maxpool", "avgpool"):
        text = f"{d[0]}x{d[1]}x{d[2]}x{d[3]}:k{d[4]}" + (f"s{d[5]}" if d[5] != 1 else "")
        text += f"p{d[6]}" if op.kernel == "maxpool" and d[6] else ""
    elif op.kernel == "lstm":
        text = f"{d[0]}x{d[1]}x{d[2]}:{d[3]}"
    elif op.kernel == "embedding":
        text = f"{d[0]}x{d[1]}:{d[2]}x{d[3]}"
    elif op.kernel == "mha":
        text = f"{d[0]}x{d[1]}x{d[2]}:h{d[3]}"
    else:
        text = "x".join(map(str, d))
    return f"{op.kernel} {text}"


def _window(size: int, r: int, s: int, pad: int) -> int:
    return (size + 2 * pad - r) // s + 1


def out_shape(op: Op) -> tuple[int, ...]:
    d, k = op.dims, op.kernel
    if k in ("conv", "dwconv"):
        channels, r, s = (d[4], d[5], d[6]) if k == "conv" else (d[1], d[4], d[5])
        return (d[0], channels, _window(d[2], r, s, r // 2), _window(d[3], r, s, r // 2))
    if k in ("maxpool", "avgpool"):
        return (d[0], d[1], _window(d[2], d[4], d[5], d[6]), _window(d[3], d[4], d[5], d[6]))
    if k == "dense":
        return (d[0], d[2])
    if k == "lstm":
        return (d[0], d[1], d[3])
    if k == "mha":
        return d[:3]
    if k == "embedding":
        return (d[0], d[1], d[3])
    return d


def flops(op: Op) -> int:
    """Forward floating-point operations (a multiply-add counts two; element-wise layers
    count their arithmetic per element: a norm ~5, an activation 1, a window R*R)."""
    d, k, out = op.dims, op.kernel, math.prod(out_shape(op))
    if k == "conv":
        return 2 * out * d[1] * d[5] ** 2
    if k == "dwconv":
        return 2 * out * d[4] ** 2
    if k == "dense":
        return 2 * d[0] * d[1] * d[2]
    if k == "lstm":
        return 2 * d[0] * d[1] * 4 * d[3] * (d[2] + d[3])
    if k == "mha":  # four projections, then scores and their weighted sum
        return 2 * d[0] * d[1] * d[2] * (4 * d[2] + 2 * d[1])
    if k in ("maxpool", "avgpool"):
        return out * d[4] ** 2
    if k in ("bn", "layernorm"):
        return 5 * out
    return 0 if k == "embedding" else out


def arrays(op: Op, seed: int = 0) -> dict[str, np.ndarray]:
    """Input ``x``, weights in PyTorch's layout, and ``cot``, the gradient the backward
    pass starts from (the loss is sum(output * cot))."""
    rng = np.random.default_rng(seed)
    d, k = op.dims, op.kernel

    def normal(*shape, scale=1.0):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)

    if k == "embedding":
        out = {"x": rng.integers(0, d[2], size=(d[0], d[1])).astype(np.int64), "table": normal(d[2], d[3])}
    elif k == "mha":
        e = d[2]
        out = {
            "x": normal(*d[:3]),
            "w_in": normal(3 * e, e, scale=e**-0.5),
            "b_in": normal(3 * e, scale=0.1),
            "w_out": normal(e, e, scale=e**-0.5),
            "b_out": normal(e, scale=0.1),
        }
    elif k == "lstm":
        h = d[3]
        out = {
            "x": normal(d[0], d[1], d[2]),
            "w_ih": normal(4 * h, d[2], scale=h**-0.5),
            "w_hh": normal(4 * h, h, scale=h**-0.5),
            "b_ih": normal(4 * h, scale=0.1),
            "b_hh": normal(4 * h, scale=0.1),
        }
    else:
        out = {
            "x": normal(*d[:4])
            if k in ("conv", "dwconv", "maxpool", "avgpool", "bn")
            else normal(*(d[:2] if k == "dense" else d))
        }
        if k == "conv":
            out.update(
                w=normal(d[4], d[1], d[5], d[5], scale=(d[1] * d[5] ** 2) ** -0.5), b=normal(d[4], scale=0.1)
            )
        elif k == "dwconv":
            out.update(w=normal(d[1], 1, d[4], d[4], scale=1 / d[4]), b=normal(d[1], scale=0.1))
        elif k == "dense":
            out.update(w=normal(d[2], d[1], scale=d[1] ** -0.5), b=normal(d[2], scale=0.1))
        elif k == "bn":
            out.update(
                gamma=1 + normal(d[1], scale=0.1),
                beta=normal(d[1], scale=0.1),
                mean=normal(d[1], scale=0.1),
                var=(1 + np.abs(normal(d[1], scale=0.1))).astype(np.float32),
            )
        elif k == "layernorm":
            out.update(gamma=1 + normal(d[-1], scale=0.1), beta=normal(d[-1], scale=0.1))
    out["cot"] = normal(*out_shape(op))
    return out


def from_model(model: str, batch: int) -> list[Layer]:
    """The distinct layers of a zoo network at ``batch``, from its walk, in network order:
    a CNN's convolutions with the ReLU (and the batch norm, where the walk has one) on
    their output, its pooling windows, and its classifier; a token network's embeddings, LSTMs (one
    direction), attention blocks (one ``mha`` per block: its projections and products),
    layer norms and dense layers.  Unpadded convolutions (LeNet's) are left out: this
    module's pad R//2."""
    from dlbench.harness.micro.ops import conv_dims, fc_dims, walk_of

    spec, walk = walk_of(model)
    seq = spec.inputs[0].shape[0] if spec.token_inputs else 1
    seen: dict[Layer, None] = {}

    def add(kind: str, *dims: int) -> None:
        seen[Layer("layer", tuple(dims), kind)] = None

    for i, op in enumerate(walk):
        if op[0] == "conv" and conv_dims(op, batch):
            conv = Layer("layer", conv_dims(op, batch), "conv")
            add("conv", *conv.dims)
            if i + 1 < len(walk) and walk[i + 1][0] == "bn":  # VGG's have none
                add("bn", *out_shape(conv))
            add("relu", *out_shape(conv))
        elif op[0] == "pool":  # (kind, channels, k, stride, pad, in)
            _, how, c, k, stride, pad, size = op
            add(f"{how}pool", batch, c, size, size, k, stride, pad)
        elif op[0] == "fc":
            add("dense", *fc_dims(op, batch))
        elif op[0] == "dense":  # (positions, in, out): per token or first
            add("dense", batch * op[1], op[2], op[3])
        elif op[0] == "embedding":
            add("embedding", batch, seq, op[1], op[2])
        elif op[0] == "layernorm":
            add("layernorm", batch, seq, op[1])
        elif op[0] == "lstm":  # (layer, direction, in, hidden, steps)
            add("lstm", batch, op[5], op[3], op[4])
        elif op[0] == "matmul" and "heads" in spec.config:
            add("mha", batch, seq, spec.config["hidden"], spec.config["heads"])
    if not seen:
        raise UserError(f"{model}: its walk names no layer dlbench layer has")
    return list(seen)


def bytes_moved(op: Op, itemsize: int) -> int:
    """The least bytes one forward call reads and writes: input, weights, output (an
    embedding reads only the rows it gathers)."""
    d, k = op.dims, op.kernel
    weights = {
        "conv": lambda: d[4] * d[1] * d[5] ** 2 + d[4],
        "dwconv": lambda: d[1] * d[4] ** 2 + d[1],
        "dense": lambda: d[1] * d[2] + d[2],
        "bn": lambda: 4 * d[1],
        "layernorm": lambda: 2 * d[-1],
        "embedding": lambda: d[0] * d[1] * d[3],
        "lstm": lambda: 4 * d[3] * (d[2] + d[3]) + 8 * d[3],
        "mha": lambda: 4 * d[2] * (d[2] + 1),
    }.get(k, lambda: 0)()
    inputs = (
        d[0] * d[1]
        if k == "embedding"
        else math.prod(
            d[:4]
            if k in ("conv", "dwconv", "maxpool", "avgpool")
            else d[:2]
            if k == "dense"
            else d[:3]
            if k in ("lstm", "mha")
            else d
        )
    )
    return itemsize * (inputs + weights + math.prod(out_shape(op)))


# This module's array names -> the canonical (PyTorch) suffixes of models.weights.
_CANONICAL = {
    "w": "weight",
    "b": "bias",
    "gamma": "weight",
    "beta": "bias",
    "mean": "running_mean",
    "var": "running_var",
    "table": "weight",
    "w_ih": "weight_ih_l0",
    "w_hh": "weight_hh_l0",
    "b_ih": "bias_ih_l0",
    "b_hh": "bias_hh_l0",
    "w_in": "in_proj_weight",
    "b_in": "in_proj_bias",
    "w_out": "out_proj.weight",
    "b_out": "out_proj.bias",
}


def canonical(op: Op, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The layer's weights as ``models.weights`` imports them into any framework, the
    layer named ``layer`` (each engine's one-layer network names it so)."""
    return {f"layer.{_CANONICAL[k]}": v for k, v in arrays.items() if k in _CANONICAL}
