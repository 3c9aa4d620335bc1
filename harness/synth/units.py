"""A profiled node as a unit the generator can emit: the op it runs, its real shapes.

ONNX Runtime's trace gives every node's input and output shapes as it ran them, after its
own fusions (a Conv with its BatchNormalization and ReLU folded in is one node, as it
runs), and the optimized graph gives its attributes.  A unit keeps those shapes per
sample: the batch axis is found by comparing the same node on the two reference
configurations, whose batch sizes differ (a transformer's MatMul runs on [seq, batch,
hidden], a Gemm on [batch x seq, hidden]), so the emitted node keeps its layout and
scales with the batch it is fed.  What the generator emits is a standard ONNX op every
backend reads: a fused or contrib op becomes its plain equivalent, and an op whose
values could run away in a long chain (Exp, Div, Pow) becomes one of the same cost that
keeps them bounded.  Nodes whose work does not grow with the batch (shape arithmetic)
become "tiny" units: they cost a dispatch, which is what they cost the applications.
The workload also names them as people do (``shape_class``) and counts the motifs the
literature names on each application's graph (``motifs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Activations emitted as themselves; every other activation becomes ReLU, and the GELU
# family the decomposed GELU (emit.py) that ONNX Runtime fuses back.
ACTIVATIONS = {"Relu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Erf", "LeakyRelu", "Elu", "Softplus"}
GELU = {"Gelu", "FastGelu", "BiasGelu", "QuickGelu"}
ADDITIVE = {"Add", "Sub", "Where", "Sum", "Max", "Min", "QLinearAdd", "SkipLayerNormalization"}
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
RECURRENT = {"LSTM", "GRU", "DynamicQuantizeLSTM"}
FLOAT = {"float", "float16", "bfloat16", "double"}
# Classes no unit stands for: a by-product of what is emitted (ONNX Runtime reorders an
# NCHWc island's edges itself), or absent from an fp32 network.
BY_PRODUCT = {"layout (NCHWc reorder)", "quantize / dequantize"}


@dataclass(frozen=True)
class Unit:
    """One emittable node: ``x`` and ``y`` are per-sample shapes (the batch axis ``axis``
    holds the per-sample multiple, 1 for an image batch, seq for a [batch x seq, hidden]
    GEMM); ``axis`` None: the node's work does not grow with the batch."""

    op: str  # the ONNX op emitted
    cls: str  # its op class (profile.classes): the time-share row it counts in
    x: tuple[int, ...]
    y: tuple[int, ...]
    axis: int | None = 0
    yaxis: int | None = 0
    attrs: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def batched(self) -> bool:
        return self.axis is not None

    def flops(self) -> float:
        """Per-sample FLOPs (one multiply-add is two), the convention of ``bench.flops``."""
        out = math.prod(self.y)
        if self.op == "Conv":
            return 2.0 * out * self.x[1] / self.attrs.get("group", 1) * math.prod(self.attrs["kernel_shape"])
        if self.op == "MatMul":
            return 2.0 * out * self.x[-1]
        if self.op in RECURRENT:
            h = self.attrs["hidden_size"]
            gates = 4 if self.op != "GRU" else 3
            return 2.0 * self.x[0] * self.dirs * gates * h * (self.x[-1] + h) * self.x[self.axis or 0]
        return float(out)

    @property
    def dirs(self) -> int:
        return 2 if self.attrs.get("direction") == "bidirectional" else 1

    def weight_elements(self) -> int:
        if self.op == "Conv":
            return self.y[1] * self.x[1] // self.attrs.get("group", 1) * math.prod(self.attrs["kernel_shape"])
        if self.op == "MatMul":
            return self.x[-1] * self.y[-1]
        if self.op in RECURRENT:
            h = self.attrs["hidden_size"]
            return self.dirs * 4 * h * (self.x[-1] + h)
        return 0

    def features(self) -> list[float]:
        """What k-medoids compares, on a log scale: work, traffic, weights, and the
        dimensions that decide which kernel runs."""
        dims = list(self.x[:4]) + [0] * (4 - len(self.x[:4]))
        kernel = self.attrs.get("kernel_shape") or [1]
        return [
            math.log2(1 + self.flops()),
            math.log2(1 + 4 * (math.prod(self.x) + math.prod(self.y))),
            math.log2(1 + 4 * self.weight_elements()),
            *(math.log2(1 + d) for d in dims),
            float(math.prod(kernel)),
            float(self.attrs.get("strides", [1])[0]),
        ]

    def key(self) -> tuple[Any, ...]:
        """Units of different keys are never one cluster: another op, rank, kernel, stride
        or a depthwise group is another kernel, whatever the sizes."""
        depthwise = self.op == "Conv" and self.attrs.get("group", 1) == self.x[1] and self.x[1] > 1
        return (
            self.cls,
            self.op,
            len(self.x),
            tuple(self.attrs.get("kernel_shape", ())),
            tuple(self.attrs.get("strides", ())),
            depthwise,
            self.batched,
        )

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "cls": self.cls, "x": list(self.x), "y": list(self.y),
                "axis": self.axis, "yaxis": self.yaxis, "attrs": self.attrs}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Unit:
        return cls(d["op"], d["cls"], tuple(d["x"]), tuple(d["y"]), d["axis"], d["yaxis"], dict(d["attrs"]))


def batch_axis(a: list[int], b: list[int] | None, batch_a: int, batch_b: int) -> int | None:
    """The axis of shape ``a`` (at batch ``batch_a``) that holds the batch: the one that
    grew with it in ``b`` (the same tensor at ``batch_b``); None where none did."""
    if b is not None and batch_a != batch_b and len(a) == len(b):
        grown = [i for i, (p, q) in enumerate(zip(a, b)) if p != q and p * batch_b == q * batch_a]
        return grown[0] if grown else None
    divisible = [i for i, d in enumerate(a) if d and d % batch_a == 0]
    return divisible[0] if divisible else None


def per_sample(shape: list[int], axis: int | None, batch: int) -> tuple[int, ...]:
    return tuple(d // batch if i == axis else d for i, d in enumerate(shape))


def _float(tensors: list[list[Any]] | None) -> list[list[int]]:
    return [list(s) for dtype, s in tensors or () if dtype in FLOAT]


def unit_of(node: dict[str, Any], other: dict[str, Any] | None, batch: int, other_batch: int) -> Unit | None:
    """The unit that stands for profiled ``node`` (``other``: the same node on the other
    reference); None where no unit does (a layout reorder, an op with no shapes)."""
    from dlbench.harness.profile.classes import node_class

    cls = node_class(node)
    if cls in BY_PRODUCT:
        return None
    xs, ys = _float(node.get("inputs")), _float(node.get("outputs"))
    oxs = _float(other.get("inputs")) if other else None
    oys = _float(other.get("outputs")) if other else None
    if not ys:
        return _tiny(cls)
    yaxis = batch_axis(ys[0], oys[0] if oys else None, batch, other_batch)
    xaxis = batch_axis(xs[0], oxs[0] if oxs else None, batch, other_batch) if xs else None
    if yaxis is None:
        return _tiny(cls)
    y = per_sample(ys[0], yaxis, batch)
    x = per_sample(xs[0], xaxis, batch) if xaxis is not None else None
    op, attrs = node["op"], dict(node.get("attrs") or {})
    if (
        cls == "convolution"
        and x is not None
        and xaxis == yaxis == 0
        and len(x) >= 3
        and op != "ConvTranspose"
    ):
        conv = {k: attrs[k] for k in ("kernel_shape", "strides", "pads", "dilations", "group") if k in attrs}
        if "kernel_shape" not in conv and len(xs) > 1 and len(xs[1]) == len(x):  # from the weight
            conv["kernel_shape"] = xs[1][2:]
        if "kernel_shape" in conv:
            act = attrs.get("activation")
            if act:
                conv["activation"] = act if act in ACTIVATIONS else "Relu"
            return Unit("Conv", cls, x, y, 0, 0, conv)
    if cls in ("matmul / gemm", "attention") and x is not None:
        rows = math.prod(y) // y[-1]
        k = math.prod(x) // rows if rows else 0
        if k >= 1:
            return Unit("MatMul", cls, (*y[:-1], k), y, yaxis, yaxis, {})
    if op in RECURRENT and x is not None and xaxis == 1 and len(x) == 3 and "hidden_size" in attrs:
        kept = {k: attrs[k] for k in ("hidden_size", "direction") if k in attrs}
        return Unit("LSTM" if op != "GRU" else "GRU", "other", x, y, xaxis, yaxis, kept)
    if cls == "normalization" and op.startswith("Skip"):  # the residual add, fused in
        return _same("SkipLayerNormalization", cls, y, yaxis)
    if cls == "normalization":
        batchnorm = op in ("BatchNormalization", "InstanceNormalization") and yaxis == 0 and len(y) >= 3
        return _same(("BatchNormalization" if batchnorm else "LayerNormalization"), cls, y, yaxis)
    if cls == "softmax":
        return _same("Softmax", cls, y, yaxis)
    if cls == "activation":
        return _same(op if op in ACTIVATIONS else "Gelu" if op in GELU else "Relu", cls, y, yaxis)
    if cls == "pooling" and x is not None and xaxis == yaxis == 0 and len(x) >= 3:
        if op.startswith("Global") or "kernel_shape" not in attrs:
            return Unit("GlobalAveragePool", cls, x, y, 0, 0, {})
        pool = {k: attrs[k] for k in ("kernel_shape", "strides", "pads", "ceil_mode") if k in attrs}
        return Unit("MaxPool" if "Max" in op else "AveragePool", cls, x, y, 0, 0, pool)
    if cls == "reduction" and x is not None and xaxis is not None:
        # Over the same axes as the application (a reduction over the last axis and one
        # over a strided axis are different kernels); its batch axis kept.
        axes = [a % len(x) for a in attrs.get("axes", [len(x) - 1]) if a % len(x) != xaxis]
        return Unit("ReduceMean", cls, x, y, xaxis, yaxis, {"axes": axes or [len(x) - 1], "keepdims": 1})
    if cls == "elementwise":
        return _same("Add" if op in ADDITIVE else "Mul", cls, y, yaxis)
    if cls == "data movement" or cls == "other":
        # The output's size is what a copy writes; a reshape moves nothing.
        return _same("Reshape" if op in RESHAPES else "Transpose", "data movement", y, yaxis)
    return _same("Add", cls, y, yaxis) if cls != "other" else None


def _same(op: str, cls: str, shape: tuple[int, ...], axis: int) -> Unit:
    return Unit(op, cls, shape, shape, axis, axis, {})


def _tiny(cls: str) -> Unit:
    """Shape arithmetic: one small int64 op, in the class the application's was."""
    op = "Gather" if cls == "data movement" else "Add"
    return Unit(
        op, cls if cls in ("data movement", "elementwise") else "elementwise", (2,), (2,), None, None, {}
    )


def shape_class(u) -> str:
    """A unit's shape class as people name them: "conv 3x3/2 depthwise", "gemm 128x768x3072"."""
    if u.op == "Conv":
        k = "x".join(map(str, u.attrs["kernel_shape"]))
        stride = u.attrs.get("strides", [1])[0]
        depthwise = u.attrs.get("group", 1) == u.x[1] > 1
        return f"conv {k}{f'/{stride}' if stride != 1 else ''}{' depthwise' if depthwise else ''}"
    if u.op == "MatMul":
        rows = math.prod(u.y) // u.y[-1]
        return f"gemm {rows}x{u.x[-1]}x{u.y[-1]}"
    return u.op.lower()


def motifs(source: str) -> dict[str, int]:
    """The motifs counted on the graph as exported: Conv+BN+ReLU, depthwise then pointwise
    convolution, attention (MatMul, optional scale and mask, Softmax, MatMul), recurrent cells."""
    import onnx

    graph = onnx.load(source, load_external_data=False).graph
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    channels = {i.name: tuple(i.dims) for i in graph.initializer}
    producer = {n.output[0]: n for n in graph.node if n.output}

    def after(node, *ops: str):
        found = consumers.get(node.output[0], []) if node.output else []
        return found[0] if len(found) == 1 and found[0].op_type in ops else None

    def group(node) -> int:
        return next((a.i for a in node.attribute if a.name == "group"), 1)

    counts = {"conv_bn_relu": 0, "depthwise_pointwise": 0, "attention": 0, "recurrent_cell": 0}
    for node in graph.node:
        if node.op_type == "Conv":
            bn = after(node, "BatchNormalization")
            if bn is not None and after(bn, "Relu", "Clip") is not None:
                counts["conv_bn_relu"] += 1
            weight = channels.get(node.input[1]) if len(node.input) > 1 else None
            nxt = after(bn or node, "Conv", "Relu", "Clip")
            nxt = after(nxt, "Conv") if nxt is not None and nxt.op_type != "Conv" else nxt
            pointwise = nxt is not None and channels.get(nxt.input[1], (0, 0, 0))[2:] == (1, 1)
            if weight is not None and group(node) > 1 and group(node) == weight[0] and pointwise:
                counts["depthwise_pointwise"] += 1
        elif node.op_type == "Softmax":
            up = producer.get(node.input[0])
            while up is not None and up.op_type in ("Add", "Mul", "Div", "Where"):
                up = producer.get(up.input[0])
            if up is not None and up.op_type == "MatMul" and after(node, "MatMul") is not None:
                counts["attention"] += 1
        elif node.op_type in ("LSTM", "GRU", "RNN"):
            counts["recurrent_cell"] += 1
    return counts
