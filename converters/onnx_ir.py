"""The ONNX IR version a file says against the one the installed ONNX Runtime reads.

onnx >= 1.23 stamps IR version 14 on every model it builds, and ONNX Runtime 1.31
refuses anything above 13.  ``lower_ir_version`` lowers the IR version to what the
installed ONNX Runtime reads (asked of ONNX Runtime itself, once per process), but only
when nothing in the file needs the newer IR: the opsets' minimum IR and the element types
(IR 9 added float8, 10 int4, 11 float4, 12 float8e8m0, 13 int2, 14 float6) are checked
first, and a file that cannot be lowered is refused with that reason.
"""

from __future__ import annotations

import functools
import os
import re

from dlbench.converters.base import ConversionError
from dlbench.converters.onnx_io import onnx, ort

# IR version that introduced each element type (onnx.proto's IR_VERSION history).
_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13, 27: 14, 28: 14}


@functools.lru_cache(maxsize=1)
def ort_max_ir_version() -> int:
    """The highest IR version the installed ONNX Runtime loads, asked of ONNX Runtime.

    It has no API for this, so a one-node model is offered at decreasing IR
    versions (a few milliseconds, once per process); its refusal message,
    when it names the maximum, short-cuts the search.
    """
    onnx_mod, rt = onnx(), ort()
    helper = onnx_mod.helper
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", onnx_mod.TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", onnx_mod.TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    version = onnx_mod.IR_VERSION
    while version >= 7:
        model.ir_version = version
        try:
            rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            return version
        except Exception as exc:  # noqa: BLE001 - ORT's refusal types vary; its text says why
            said = re.search(r"max supported IR version:\s*(\d+)", str(exc))
            version = int(said.group(1)) if said and int(said.group(1)) < version else version - 1
    return 7


def _element_types(model) -> set[int]:
    types: set[int] = set()
    g = model.graph
    for t in g.initializer:
        types.add(t.data_type)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type"):
            types.add(vi.type.tensor_type.elem_type)
    for node in g.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                types.add(attr.t.data_type)
            if attr.name == "to":
                types.add(attr.i)
    return types


def required_ir_version(model) -> tuple[int, str]:
    """(minimum IR version the model's content needs, what needs it)."""
    onnx_mod = onnx()
    need, why = 3, "the format"
    opset_ir = onnx_mod.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    if opset_ir > need:
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        need, why = opset_ir, f"opset {opsets}"
    for t in _element_types(model):
        if _TYPE_IR.get(t, 0) > need:
            need = _TYPE_IR[t]
            why = f"element type {onnx_mod.TensorProto.DataType.Name(t)}"
    if model.functions and need < 8:
        need, why = 8, "model-local functions"
    return need, why


def lower_ir_version(model, path: str | os.PathLike = "model") -> tuple[int, int]:
    """Lower ``model.ir_version`` to what ONNX Runtime reads; return (before, after).

    Raises ConversionError when the content needs a newer IR than ONNX Runtime
    reads: such a file cannot run here, and pretending otherwise would only
    move the failure into the benchmark.
    """
    before = model.ir_version
    limit = ort_max_ir_version()
    if before <= limit:
        return before, before
    need, why = required_ir_version(model)
    if need > limit:
        raise ConversionError(
            f"{path}: needs ONNX IR version {need} ({why}), and the installed "
            f"onnxruntime reads at most IR {limit}: upgrade onnxruntime"
        )
    model.ir_version = max(need, min(before, limit))
    return before, model.ir_version
