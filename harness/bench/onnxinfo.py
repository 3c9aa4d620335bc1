"""What the harness reads from an ONNX graph before anything runs.

Only the ``onnx`` package is used (no engine): the parent process validates
the model here so that a corrupt file, an unknown operator or an input it
cannot synthesize is one clear line before the sweep starts, and reads the
input signature, embedding table sizes and the graph's own precision.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.converters import onnx_io, onnx_summary
from dlbench.core.errors import UserError

# Ops that only pass data through: an index that reaches a Gather through
# them is still the same index.
PASS_THROUGH = {
    "Cast",
    "Identity",
    "Reshape",
    "Unsqueeze",
    "Squeeze",
    "Flatten",
    "Expand",
    "Transpose",
    "Slice",
    "Concat",
    "DequantizeLinear",
}
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def load(path: str | Path):
    """The ModelProto at ``path``, or a UserError saying why it is not one.

    Reading and recognising the file (missing, text, corrupt, truncated) is
    the converters' loader, shared by every command that takes an ONNX file.
    """
    model = onnx_io.load(path, check=False)
    check_operators(model, path)
    # The structure as build and verify check it, so the same damaged file (an initializer
    # cut short, an output nothing produces) gets the same one-line refusal from all three.
    onnx_io.check_model(model, path, full=False)
    return model


def check_operators(model, path: str | Path) -> None:
    """Every standard-domain node must be an operator that exists at the model's opset.

    Custom domains (com.microsoft, a plugin's) are left to the engine, which
    knows what it implements.
    """
    import onnx

    opsets = {o.domain or "": o.version for o in model.opset_import}
    for node in _all_nodes(model.graph):
        domain = node.domain or ""
        if domain not in STANDARD_DOMAINS:
            continue
        version = opsets.get(domain, opsets.get("ai.onnx" if domain == "" else "", 0))
        if not isinstance(node.op_type, str) or not isinstance(version, int):
            raise UserError(f"{path}: a node's operator name or opset is not valid (the file is damaged)")
        try:
            onnx.defs.get_schema(node.op_type, version, "" if domain == "ai.onnx" else domain)
        except onnx.defs.SchemaError:
            where = f"domain '{domain}'" if domain else "the default domain"
            raise UserError(
                f"{path}: unknown operator {node.op_type!r} (node "
                f"{node.name or '?'}, {where}, opset {version})"
            ) from None


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.g is not None and attr.g.node:
                yield from _all_nodes(attr.g)
            for g in attr.graphs:
                yield from _all_nodes(g)


# One reading of an ONNX signature for every command: converters.onnx_io's.
signature = onnx_summary.signature


def embedding_ranges(model) -> dict[str, tuple[int, int]]:
    """Input name -> [0, table rows) for integer inputs that index a Gather's table.

    An index is followed back from Gather's ``indices`` through pass-through
    ops to a graph input; the table is followed back to an initializer (or a
    Constant).  Several tables on one input keep the smallest.
    """
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    shapes = {i.name: list(i.dims) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    shapes[node.output[0]] = list(attr.t.dims)
    inputs = {v.name for v in graph.input} - {i.name for i in graph.initializer}

    def origin_input(name: str, depth: int = 0) -> str | None:
        if name in inputs:
            return name
        node = producer.get(name)
        if node is None or depth > 16 or node.op_type not in PASS_THROUGH:
            return None
        return origin_input(node.input[0], depth + 1) if node.input else None

    def table_shape(name: str, depth: int = 0) -> list[int] | None:
        if name in shapes:
            return shapes[name]
        node = producer.get(name)
        if node is None or depth > 16 or node.op_type not in PASS_THROUGH or not node.input:
            return None
        return table_shape(node.input[0], depth + 1)

    ranges: dict[str, tuple[int, int]] = {}
    for node in graph.node:
        if node.op_type not in ("Gather", "GatherElements") or len(node.input) < 2:
            continue
        source = origin_input(node.input[1])
        table = table_shape(node.input[0])
        if source is None or not table:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        rows = table[axis] if -len(table) <= axis < len(table) else None
        if rows:
            low, high = ranges.get(source, (0, rows))
            ranges[source] = (0, min(high, rows))
    return ranges


# One definition each for the whole project.
precision = onnx_summary.precision_of
metadata = onnx_io.metadata
