"""Old graphs made ordinary before anything optimizes or quantizes them.

Older exporters (IR version < 4: the onnx package's "light" model zoo, Caffe2
exports) declare every initializer as a graph input too, and some compute
their weights with nodes (``ConstantOfShape`` of an initializer shape).  ONNX
Runtime treats an initializer that is also an input as a default the caller
may override, so neither its optimizer nor the quantizer may fold it, and the
quantizer finds no weight initializers ("Input conv1_w_0 is undefined!").

``normalize`` makes such a graph ordinary, in four recorded steps, each only
when the graph needs it (a graph that needs none is left as it is):

1. **freeze** — initializers stop being graph inputs.  A user who really feeds
   weights at run time keeps them with ``freeze=False``; the hop then sees the
   graph as it was.
2. **opset** — a graph below the next tool's minimum opset is raised to it by
   onnx's version converter (the quantizer's per-channel Q/DQ needs 13,
   TensorRT's parser reads 9 and later).
3. **sum** — a ``Sum`` of two inputs (Caffe2's residual add) becomes the ``Add``
   it computes, which the quantizer has an int8 kernel for;
4. **fold** — constant subgraphs become initializers, by ONNX Runtime's own
   optimizer at its basic level, saved offline.  That level only rewrites with
   standard ONNX operators (constant folding, redundant-node removal, fusions
   that keep the arithmetic), so the file still runs anywhere.

It never judges its own output: the caller runs the normalized graph against
the original on the same inputs before anything else happens to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io
from dlbench.converters.base import ConversionError
from dlbench.core.atomic import scratch
from dlbench.core.errors import first_line

# Nodes whose outputs change between runs: never constants, whatever their inputs.
_RANDOM_OPS = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}
# IR version 4 made initializers that are not graph inputs legal.
_FROZEN_IR = 4


def initializer_inputs(graph) -> list[str]:
    """Graph inputs that are also initializers (overridable weights, IR < 4 style)."""
    inits = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name in inits]


def foldable_nodes(graph, frozen: bool = True) -> int:
    """How many nodes compute only from constants (``Constant`` nodes themselves aside):
    what folding would turn into initializers.  With ``frozen`` False an initializer that
    is also an input is not a constant, as ONNX Runtime sees it."""
    overridable = set() if frozen else {i.name for i in graph.input}
    consts = {t.name for t in graph.initializer} - overridable
    count = 0
    for node in graph.node:
        if node.op_type in _RANDOM_OPS or any(a.g.node or a.graphs for a in node.attribute):
            continue
        if node.op_type == "Constant":
            consts.update(node.output)
            continue
        if all(not i or i in consts for i in node.input):
            consts.update(node.output)
            count += 1
    return count


def two_input_sums(graph) -> list:
    """``Sum`` nodes of two inputs: Caffe2's residual adds.  ``Add`` computes the same (with
    the same broadcasting), and only ``Add`` has an int8 kernel in ONNX Runtime's quantizer:
    a ``Sum`` stays float between a DequantizeLinear and a QuantizeLinear."""
    return [n for n in graph.node if n.op_type == "Sum" and len(n.input) == 2]


def opset_of(model) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def needs(model, *, freeze: bool = True, min_opset: int | None = None) -> list[str]:
    """The steps ``normalize`` would take on ``model``, in order (empty: none)."""
    steps = []
    if freeze and initializer_inputs(model.graph):
        steps.append("freeze")
    opset = opset_of(model)
    if min_opset and opset is not None and opset < min_opset:
        steps.append("opset")
    if two_input_sums(model.graph):
        steps.append("sum")
    if foldable_nodes(model.graph, frozen=freeze):
        steps.append("fold")
    return steps


def _freeze(model) -> int:
    names = set(initializer_inputs(model.graph))
    kept = [i for i in model.graph.input if i.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.ir_version = max(model.ir_version, _FROZEN_IR)
    return len(names)


def _fold(src: Path, out: Path) -> str:
    """ONNX Runtime's basic-level optimizer on ``src``, its result saved to ``out``."""
    rt = onnx_io.ort()
    opts = rt.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(out)
    try:
        rt.InferenceSession(str(src), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - the runtime's own refusal, one line
        raise ConversionError(
            f"folding constants with onnxruntime {rt.__version__} failed: {first_line(exc)[:300]}"
        ) from None
    return f"onnxruntime {rt.__version__} basic-level optimizer, saved offline"


def _upgrade(model, target: int):
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, target)
    except Exception as exc:  # noqa: BLE001 - an operator without an adapter, ...
        raise ConversionError(
            f"onnx's version converter cannot raise opset {opset_of(model)} "
            f"to {target}: {first_line(exc)[:300]}"
        ) from None


def normalize(
    source: str | Path, out: str | Path, *, freeze: bool = True, min_opset: int | None = None
) -> dict[str, Any] | None:
    """Write the normalized graph of ``source`` to ``out`` and say what was done, or return
    None (writing nothing) when the graph needs no step."""
    onnx = onnx_io.onnx()
    model = onnx_io.load(source, check=False)
    steps = needs(model, freeze=freeze, min_opset=min_opset)
    if not steps:
        return None
    info: dict[str, Any] = {"steps": steps, "nodes_before": len(model.graph.node)}
    if "freeze" in steps:
        info["frozen_initializer_inputs"] = _freeze(model)
    elif initializer_inputs(model.graph):
        info["initializer_inputs_kept"] = len(initializer_inputs(model.graph))
    out = Path(out)
    if "opset" in steps:
        # Before folding, while the weights are still small nodes: the converter copies
        # the whole model, and folding writes the large file once, last.
        info["opset_upgraded"] = [opset_of(model), min_opset]
        model = _upgrade(model, min_opset)
        info["opset_tool"] = f"onnx {onnx.__version__} version_converter"
    if "sum" in steps:
        sums = two_input_sums(model.graph)
        for node in sums:
            node.op_type = "Add"
        info["sums_as_adds"] = len(sums)
    if "fold" in steps:
        info["folded_nodes"] = foldable_nodes(model.graph, frozen=freeze)
        with scratch("dlbench-normalize") as tmp:
            before = Path(tmp, "before.onnx")
            onnx.save(model, str(before))
            staged = out.with_name(f".{out.name}.folding")
            try:
                info["fold_tool"] = _fold(before, staged)
                onnx_io.publish_mode(staged)
                staged.replace(out)
            finally:
                staged.unlink(missing_ok=True)
        model = onnx_io.load(out, check=False)
    else:
        onnx_io.save(model, out)
    info["nodes_after"] = len(model.graph.node)
    info["initializers_after"] = len(model.graph.initializer)
    return info


def describe(info: dict[str, Any]) -> str:
    """One line for the user: what normalizing did to their graph."""
    parts = []
    if info.get("frozen_initializer_inputs"):
        parts.append(
            f"froze {info['frozen_initializer_inputs']} initializers that were also "
            f"graph inputs (--no-freeze keeps them)"
        )
    if info.get("folded_nodes"):
        parts.append(
            f"folded {info['folded_nodes']} constant nodes "
            f"({info['nodes_before']} -> {info['nodes_after']} nodes)"
        )
    if info.get("opset_upgraded"):
        old, new = info["opset_upgraded"]
        parts.append(f"raised opset {old} to {new}")
    if info.get("sums_as_adds"):
        parts.append(f"wrote {info['sums_as_adds']} two-input Sum nodes as Add")
    verdict = info.get("verdict")
    if verdict:
        parts.append(
            "checked against the original: " + ("same outputs" if verdict["ok"] else "DIFFERENT outputs")
        )
    return "normalized the graph: " + "; ".join(parts)
