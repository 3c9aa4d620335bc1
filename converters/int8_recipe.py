"""Which nodes of a graph the static INT8 recipe keeps in float, and why.

The rule (``float_tail``) keeps in float every op with a fixed output range
(Softmax, LogSoftmax, Sigmoid, Tanh, HardSigmoid, Softsign) whose output
reaches a graph output directly or only through shape-only ops (Reshape,
Flatten, Identity, Squeeze, Unsqueeze, Transpose), together with those
shape-only ops; and a Concat that packs several heads into one graph output,
looking through it for the same ops.  Why these and nowhere else:

* ONNX Runtime's quantizer does not calibrate a Softmax's output: it pins the
  range to [0, 1], so uint8 steps of 1/255.  A classifier that is unsure
  (random weights, or 1000 classes with no clear winner) outputs
  probabilities around 1/1000, all of which round to 0: a Keras-applications
  ResNet-50 came out with cosine 0.06 against fp32.  Sigmoid and Tanh
  saturate the same way: what the user reads is small differences near 0 or
  1, below one step.  LogSoftmax is unbounded below, and one range for its
  long negative tail flattens the classes that matter.
* At the end of the graph nothing downstream consumes int8, so quantizing
  these ops buys no speed: the output is float anyway, and the op is
  elementwise over [N, classes], negligible next to the convolutions.  Inside
  the graph (a Sigmoid gate in a squeeze-excitation block) a float op would
  cost a DequantizeLinear/QuantizeLinear pair per use and break ONNX
  Runtime's fused int8 chains, and calibration gives those tensors real
  ranges, so they stay quantized.
* A Concat at the output has one quantization range for all it joins: Mask
  R-CNN's mask logits (about +-180 after a short run) set a step of 1.4 and
  its RPN and box outputs (under 1) all came out 0.  It buys no speed there
  either.
* The shape-only ops between such an op and the output go float with it: on
  a quantized tensor they would get Q/DQ pairs of their own, which puts the
  same fixed-range quantization back one node later.

Users add their own with ``--exclude-nodes`` and ``--exclude-op-types``.
Names are those of the graph the quantizer sees (after ``quant_pre_process``,
unnamed nodes named ``<OpType>_<index>``), which are also the names the
per-layer error report prints, so a name read there can be passed back.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from dlbench.converters.base import ConversionError

FIXED_RANGE_OPS = ("Softmax", "LogSoftmax", "Sigmoid", "Tanh", "HardSigmoid", "Softsign")
SHAPE_ONLY_OPS = ("Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze", "Transpose")
# What the walk back from an output looks through: shapes, and a float-to-float Cast (a
# PyTorch model's final ``.float()``).
_TAIL_OPS = SHAPE_ONLY_OPS + ("Cast",)


def name_nodes(graph) -> int:
    """Give every unnamed node a unique name (``<OpType>_<index>``): the quantizer excludes
    nodes by name, and an empty name would match every unnamed node at once."""
    taken = {n.name for n in graph.node if n.name}
    count = 0
    for i, node in enumerate(graph.node):
        if node.name:
            continue
        name, k = f"{node.op_type}_{i}", 0
        while name in taken:
            k += 1
            name = f"{node.op_type}_{i}_{k}"
        node.name = name
        taken.add(name)
        count += 1
    return count


def flat_gemm_biases(graph) -> int:
    """Give every Gemm whose bias is a ``[1, N]`` initializer the same bias as ``[N]``.
    ONNX Runtime's quantizer fuses MatMul + Add into Gemm and quantizes a Gemm's bias per
    channel along axis 0: of a ``[1, N]`` bias that axis has one element and N scales, and
    the INT8 graph fails at run time ("scale must be 1D tensor with size 1").  Gemm
    broadcasts either shape alike, so the graph computes the same; a bias other nodes
    also read is copied rather than reshaped."""
    inits = {t.name: t for t in graph.initializer}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    count = 0
    for node in graph.node:
        bias = inits.get(node.input[2]) if node.op_type == "Gemm" and len(node.input) > 2 else None
        if bias is None or len(bias.dims) != 2 or bias.dims[0] != 1:
            continue
        if readers[bias.name] > 1:
            copy = graph.initializer.add()
            copy.CopyFrom(bias)
            copy.name = f"{node.name}_{bias.name}_flat"
            readers[bias.name] -= 1
            node.input[2], bias = copy.name, copy
        bias.dims[:] = [bias.dims[1]]
        count += 1
    return count


def float_tail(graph) -> list[dict[str, str]]:
    """Fixed-range ops and output-joining Concats at the graph outputs (through shape-only
    ops), and those shape-only ops."""
    producer = {out: n for n in graph.node for out in n.output}
    found: dict[str, dict[str, str]] = {}

    def walk(tensor: str, output: str) -> bool:
        """Mark what ends at ``output`` from ``tensor`` up; True if anything was."""
        chain, node = [], producer.get(tensor)
        while node is not None and node.op_type in _TAIL_OPS and node.input:
            chain.append(node)
            node = producer.get(node.input[0])
        if node is None:
            return False
        if node.op_type == "Concat":
            # Heads packed into one output (SSD's boxes and scores, Mask R-CNN's RPN, box
            # and mask heads): a quantized Concat gives all its inputs ONE range, and
            # the small-valued heads round to zero next to the large ones.
            for name in node.input:
                walk(name, output)
            reason = f"joins heads into graph output {output!r}: one range for all"
        elif node.op_type in FIXED_RANGE_OPS:
            reason = f"fixed output range at graph output {output!r}"
        else:
            return False
        through = f" through {', '.join(n.op_type for n in reversed(chain))}" if chain else ""
        found.setdefault(node.name, {"node": node.name, "op": node.op_type, "reason": reason + through})
        for n in chain:
            found.setdefault(
                n.name,
                {
                    "node": n.name,
                    "op": n.op_type,
                    "reason": f"{'shape-only' if n.op_type in SHAPE_ONLY_OPS else 'a cast'}, "
                    f"after the float {node.op_type} at {output!r}",
                },
            )
        return True

    for output in graph.output:
        walk(output.name, output.name)
    return list(found.values())


def _brief(items: Iterable[str], limit: int = 8) -> str:
    items = list(items)
    more = f", ... ({len(items)} in all)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def requested(graph, source_graph, nodes: Iterable[str], op_types: Iterable[str]) -> list[dict[str, str]]:
    """The user's ``--exclude-nodes`` / ``--exclude-op-types`` as nodes of ``graph`` (the
    pre-processed one); a name or type the graph lacks is refused, saying what it has."""
    by_name = {n.name: n for n in graph.node}
    result: dict[str, dict[str, str]] = {}
    for name in nodes:
        node = by_name.get(name)
        if node is None:
            if any(n.name == name for n in source_graph.node):
                raise ConversionError(
                    f"--exclude-nodes {name}: quant_pre_process's graph optimization folded "
                    f"that node into another (BatchNorm into Conv, constants); name a node of "
                    f"the optimized graph (the per-layer report prints them)"
                )
            close = difflib.get_close_matches(name, list(by_name), n=3, cutoff=0.5)
            hint = (
                f"; did you mean {', '.join(close)}?"
                if close
                else f"; it has {len(by_name)} nodes, e.g. {_brief(by_name, 4)}"
            )
            raise ConversionError(f"--exclude-nodes {name}: no node of that name in the graph{hint}")
        result[name] = {"node": name, "op": node.op_type, "reason": "--exclude-nodes"}
    present = sorted({n.op_type for n in graph.node})
    for op in op_types:
        if op not in present:
            raise ConversionError(
                f"--exclude-op-types {op}: the graph has no {op} node; its op types: {_brief(present, 30)}"
            )
        for n in graph.node:
            if n.op_type == op:
                result.setdefault(n.name, {"node": n.name, "op": op, "reason": f"--exclude-op-types {op}"})
    return list(result.values())


def quantized_types(types: Iterable[str], quant: Any, *, dynamic: bool) -> list[str] | None:
    """``--quantize-op-types`` as the quantizer's ``op_types_to_quantize`` (None: all it
    handles).  A type the quantizer cannot quantize would silently quantize nothing:
    refused, naming the ones it can."""
    types = list(types)
    if not types:
        return None
    registry = quant.registry
    known = (
        set(registry.IntegerOpsRegistry)
        if dynamic
        else (set(registry.QDQRegistry) | set(registry.QLinearOpsRegistry))
    )
    unknown = [t for t in types if t not in known]
    if unknown:
        raise ConversionError(
            f"--quantize-op-types {','.join(unknown)}: ONNX Runtime's "
            f"{'dynamic' if dynamic else 'static'} quantizer does not "
            f"quantize that op type; it does {_brief(sorted(known), 40)}"
        )
    return types


def float_nodes(graph, source_graph, options: Any, *, static: bool) -> list[dict[str, str]]:
    """Every node the quantizer must leave in float: the user's, then the rule's (static
    quantization only: dynamic quantization never quantizes these ops)."""
    chosen = {
        d["node"]: d for d in requested(graph, source_graph, options.exclude_nodes, options.exclude_op_types)
    }
    if static and options.float_tail:
        for d in float_tail(graph):
            chosen.setdefault(d["node"], d)
    return list(chosen.values())


RECURRENT_OPS = ("LSTM", "GRU", "RNN")


def activation_products(graph) -> list[str]:
    """MatMul/Einsum nodes that multiply two activations (attention's Q·Kᵀ and scores·V): no
    operand is a weight (an initializer or a Constant's output)."""
    fixed = {i.name for i in graph.initializer}
    fixed |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return [
        n.name or n.op_type
        for n in graph.node
        if n.op_type in ("MatMul", "Einsum") and len(n.input) >= 2 and not any(i in fixed for i in n.input)
    ]


MODE_PROP = "dlbench.int8_mode"  # a model's own INT8 mode, "static" or "dynamic"


def mode_metadata(dynamic: bool) -> dict[str, str]:
    """The metadata that declares an INT8 mode (``declared_mode`` reads it back)."""
    return {MODE_PROP: "dynamic" if dynamic else "static"}


def declared_mode(model) -> bool | None:
    """Whether ``model``'s metadata declares its INT8 mode dynamic (None: it declares none).

    A generated network stands for a set of applications: its graph would choose by its
    own units (one recurrent unit among hundreds of convolutions makes it dynamic), while
    what it must reproduce is how the set quantizes, so it carries the set's mode, and
    every build of it, by whoever makes it, takes that mode."""
    said = {p.key: p.value for p in model.metadata_props}.get(MODE_PROP)
    if said is None:
        return None
    if said not in ("static", "dynamic"):
        raise ConversionError(f"metadata {MODE_PROP}={said!r}: expected 'static' or 'dynamic'")
    return said == "dynamic"


def choose_mode(graph, asked: bool | None, declared: bool | None = None) -> tuple[bool, str]:
    """(dynamic?, why): the user's --dynamic/--static, else the mode the model declares
    (``declared_mode``), else what the graph is.

    ONNX Runtime's quantization guide recommends dynamic quantization for transformers
    and RNNs and static for CNNs: an attention's or a recurrent cell's activation ranges
    move with each input (a calibrated range clips or wastes them: ViT-tiny's static
    INT8 came out at cosine 0.62), while a CNN's are stable enough to calibrate once and
    gain the fused int8 chains that static Q/DQ allows."""
    if asked is not None:
        return asked, "--dynamic" if asked else "--static"
    if declared is not None:
        return declared, f"the model's {MODE_PROP} metadata ({'dynamic' if declared else 'static'})"
    recurrent = [n.op_type for n in graph.node if n.op_type in RECURRENT_OPS]
    products = activation_products(graph)
    if recurrent:
        return True, f"the graph: {len(recurrent)} recurrent layer(s) ({_brief(sorted(set(recurrent)))})"
    if products:
        return True, f"the graph: {len(products)} activation-by-activation products (attention)"
    return False, "the graph: no attention or recurrent layers (static, calibrated)"
