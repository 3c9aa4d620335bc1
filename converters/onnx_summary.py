"""What an ONNX file declares, read once for every command: inputs and outputs, operator
counts, opsets, precision, dlbench metadata.

Reports, records, the verifier's input synthesis and the bench planner all
describe a graph through ``summarize`` / ``signature``, so they agree on what
a model takes (``models.tensors.TensorInfo``: named dimensions bind together,
anonymous ones are unknowns of their own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlbench.converters.onnx_io import metadata, onnx
from dlbench.core.tensors import TensorInfo

# Ops whose presence means the graph computes in int8 (static QDQ, QOperator, dynamic).
INT8_OPS = {
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "QLinearAdd",
    "QLinearMul",
    "ConvInteger",
    "MatMulInteger",
    "DynamicQuantizeMatMul",
    "DynamicQuantizeLSTM",
    "QAttention",
    "QGemm",
}


@dataclass
class Summary:
    """What a report, a record and the verifier need to know about an ONNX file."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    node_count: int
    op_counts: dict[str, int]
    opsets: dict[str, int]
    ir_version: int
    precision: str
    producer: str
    metadata: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [_as_dict(t) for t in self.inputs],
            "outputs": [_as_dict(t) for t in self.outputs],
            "node_count": self.node_count,
            "op_counts": self.op_counts,
            "opsets": self.opsets,
            "ir_version": self.ir_version,
            "precision": self.precision,
            "producer": self.producer,
            "metadata": self.metadata,
        }


def _as_dict(t: TensorInfo) -> dict[str, Any]:
    return {"name": t.name, "dtype": t.dtype, "shape": list(t.shape)}


def _np_dtype(elem_type: int) -> str:
    helper = onnx().helper
    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        pass
    try:
        return onnx().TensorProto.DataType.Name(elem_type).lower()
    except ValueError:  # a damaged file's number no ONNX version defines
        return f"elem_type {elem_type}"


def tensor_info(value_info) -> TensorInfo:
    """The declared tensor as written; TensorInfo reads placeholders such as "?" as
    anonymous unknowns (``models.tensors.dimension``), not as one shared symbol."""
    t = value_info.type.tensor_type
    dims: list[Any] = []
    if t.HasField("shape"):
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
    return TensorInfo(value_info.name, _np_dtype(t.elem_type), tuple(dims))


def signature(model) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """(inputs, outputs); graph inputs that are initializers (old IR) are weights, not inputs."""
    weights = {i.name for i in model.graph.initializer}
    return (
        [tensor_info(v) for v in model.graph.input if v.name not in weights],
        [tensor_info(v) for v in model.graph.output],
    )


def precision_of(model) -> str:
    """The graph's own precision: int8 if it quantizes, else the float type that holds
    most weight elements (fp16, bf16, fp64), else the inputs' float type, else fp32."""
    onnx_mod = onnx()
    ops = {n.op_type for n in model.graph.node}
    if ops & INT8_OPS:
        return "int8"
    floats = {
        onnx_mod.TensorProto.FLOAT: "fp32",
        onnx_mod.TensorProto.FLOAT16: "fp16",
        onnx_mod.TensorProto.BFLOAT16: "bf16",
        onnx_mod.TensorProto.DOUBLE: "fp64",
    }
    weighted: dict[str, int] = {}
    for init in model.graph.initializer:
        if init.data_type in floats:
            n = 1
            for d in init.dims:
                n *= d
            weighted[floats[init.data_type]] = weighted.get(floats[init.data_type], 0) + n
    if weighted:
        return max(weighted, key=weighted.get)
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name not in inits and vi.type.tensor_type.elem_type in (
            onnx_mod.TensorProto.FLOAT16,
            onnx_mod.TensorProto.BFLOAT16,
        ):
            return floats[vi.type.tensor_type.elem_type]
    return "fp32"


def summarize(model) -> Summary:
    g = model.graph
    inputs, outputs = signature(model)
    counts: dict[str, int] = {}
    for n in g.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    producer = f"{model.producer_name} {model.producer_version}".strip()
    return Summary(
        inputs=inputs,
        outputs=outputs,
        node_count=len(g.node),
        op_counts=dict(sorted(counts.items())),
        opsets={o.domain or "ai.onnx": o.version for o in model.opset_import},
        ir_version=model.ir_version,
        precision=precision_of(model),
        producer=producer,
        metadata=metadata(model),
    )
