"""FLOPs per sample, counted from an ONNX graph with its shapes inferred.

Convention, the same as the zoo's analytic counts (``dlbench models``): one
multiply-add is two FLOPs, and the headline figure counts the matrix work
only —

* Conv / ConvInteger / QLinearConv: output elements x (input channels /
  group) x kernel area;
* ConvTranspose: input elements x (output channels / group) x kernel area;
* Gemm, MatMul, MatMulInteger, QLinearMatMul, QGemm: output elements x the
  contracted dimension (numpy broadcasting for batched MatMul);

* LSTM / GRU / RNN (and ONNX Runtime's DynamicQuantizeLSTM): per time step,
  batch element and direction, gates x hidden x (input + hidden) — the sizes
  of the W and R weights — times the sequence length;

bias additions are not counted.  Everything else is counted apart as
``other_gflops_per_sample`` with one FLOP per output element for element-wise
and activation ops, two for BatchNormalization and LayerNormalization-like
ops (scale and shift), kernel area per output for pooling, input elements
for reductions and global pooling, five per element for Softmax/LogSoftmax,
per recurrent step and hidden unit the gate activations and state updates
(LSTM 9, GRU 7, RNN 1);
data movement (Reshape, Transpose, Gather, Concat, ...) counts nothing.
``weight_bytes`` and ``io_bytes_per_sample`` give the compulsory memory traffic
(weights once a batch, inputs and outputs), what places a model cell on the report's
roofline.
Nodes whose shapes cannot be inferred are listed in ``uncounted``.  ONNX has
no shape inference for ONNX Runtime's contrib recurrent ops, which would leave
everything after a dynamically quantized LSTM unknown: their output shapes are
filled in from the input and the attributes, and inference runs again.
"""

from __future__ import annotations

import contextlib
import functools
import io
from collections.abc import Iterator, Sequence
from typing import Any

CONV = {"Conv", "ConvInteger", "QLinearConv"}
MATMUL = {"MatMul", "MatMulInteger", "QLinearMatMul"}
GEMM = {"Gemm", "QGemm"}
ELEMENTWISE = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Sigmoid",
    "Tanh",
    "Clip",
    "Exp",
    "Log",
    "Sqrt",
    "Pow",
    "Erf",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Elu",
    "Selu",
    "Softplus",
    "Neg",
    "Abs",
    "Reciprocal",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Where",
    "Mish",
    "Swish",
    "Celu",
}
AFFINE = {
    "BatchNormalization",
    "InstanceNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "SkipLayerNormalization",
}
POOL = {"MaxPool", "AveragePool", "LpPool"}
REDUCE = {
    "GlobalAveragePool",
    "GlobalMaxPool",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceL2",
}
SOFTMAX = {"Softmax", "LogSoftmax"}
# Recurrent op -> (gates, element-wise FLOPs per step and hidden unit).
RECURRENT = {"LSTM": (4, 9), "GRU": (3, 7), "RNN": (1, 1), "DynamicQuantizeLSTM": (4, 9)}


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _attr(node, name: str, default: Any = None) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def with_input_shapes(model, shapes: dict[str, Sequence[int]]):
    """A copy of ``model`` whose graph inputs have the concrete ``shapes``, shapes inferred."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for d in shapes[vi.name]:
                dims.add().dim_value = int(d)
    del m.graph.value_info[:]
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    # One more pass per contrib recurrent layer whose outputs become known.
    for _ in range(sum(n.op_type in RECURRENT for n in inferred.graph.node)):
        added = _recurrent_output_shapes(inferred)
        if not added:
            break
        inferred.graph.value_info.extend(added)
        inferred = onnx.shape_inference.infer_shapes(inferred, strict_mode=False, data_prop=True)
    if _unresolved(inferred):
        inferred = _symbolic(inferred) or inferred
    return inferred


@functools.cache
def _symbolic_module():
    """``onnxruntime.tools.symbolic_shape_infer``, without the PyTorch its package imports
    (``converters.ort_tools``); None where this ONNX Runtime has none that loads."""
    from dlbench.converters.ort_tools import without_torch

    without_torch()
    try:
        from onnxruntime.tools import symbolic_shape_infer
    except Exception:  # noqa: BLE001 - another release's tools: ONNX's inference alone
        return None
    return symbolic_shape_infer


def _unresolved(model) -> bool:
    table = _shape_table(model)
    return any(o and o not in table for n in model.graph.node for o in n.output[:1])


def _symbolic(model):
    """ONNX Runtime's symbolic shape inference (its transformer tools' own): it evaluates
    the Shape -> Gather -> Concat -> Reshape chains that attention masks and head splits
    are built from, which ONNX's inference leaves unknown; None where it is absent or fails."""
    module = _symbolic_module()
    if module is None:
        return None
    # The pass prints its complaints (an opset it does not read, a node it cannot size) to
    # stdout and logs: a command's output is dlbench's, and None already says it failed.
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            return module.SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    except Exception:  # noqa: BLE001 - a third-party pass on any graph: fall back to ONNX's
        return None


def _layout(node) -> tuple[int, int, int]:
    """(sequence axis, batch axis, directions) of a recurrent node's X and Y."""
    layout = 0 if node.op_type == "DynamicQuantizeLSTM" else _attr(node, "layout", 0)
    direction = _attr(node, "direction", b"forward")
    directions = 2 if direction in (b"bidirectional", "bidirectional") else 1
    return (1, 0, directions) if layout else (0, 1, directions)


def _recurrent_output_shapes(model) -> list:
    """value_info for the outputs of recurrent nodes that inference left unknown."""
    import onnx

    table = _shape_table(model)
    added = []
    for node in model.graph.node:
        if node.op_type not in RECURRENT or not node.input:
            continue
        x, hidden = table.get(node.input[0]), _attr(node, "hidden_size")
        if x is None or len(x) != 3 or not hidden:
            continue
        seq_axis, _, d = _layout(node)
        seq, batch = (x[1], x[0]) if seq_axis else (x[0], x[1])
        y = [batch, seq, d, hidden] if seq_axis else [seq, d, batch, hidden]
        state = [batch, d, hidden] if seq_axis else [d, batch, hidden]
        for i, name in enumerate(node.output):
            if name and name not in table:
                added.append(
                    onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, y if i == 0 else state)
                )
    return added


def _shape_table(model) -> dict[str, list[int]]:
    table: dict[str, list[int]] = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            table[vi.name] = [d.dim_value for d in t.shape.dim]
    for init in model.graph.initializer:
        table[init.name] = list(init.dims)
    return table


def count(model, shapes: dict[str, Sequence[int]], batch_size: int) -> dict[str, Any]:
    """GFLOPs per sample for ``model`` run with input ``shapes`` at ``batch_size``."""
    inferred = with_input_shapes(model, shapes)
    table = _shape_table(inferred)
    macs, other, uncounted = 0, 0, []
    for node, work in _works(inferred, table):
        if work is None:
            uncounted.append(node.name or node.op_type)
        else:
            macs, other = macs + work[0], other + work[1]
    return {
        "gflops_per_sample": 2 * macs / batch_size / 1e9,
        "other_gflops_per_sample": other / batch_size / 1e9,
        "macs_per_sample": macs / batch_size,
        "uncounted": uncounted,
        **_compulsory_bytes(inferred, table, batch_size),
    }


def by_op_type(model, shapes: dict[str, Sequence[int]]) -> dict[str, dict[str, float]]:
    """Multiply-accumulates and other operations of one run at ``shapes``, per op type (and
    how many nodes of it could not be counted): the static side of ``dlbench profile``."""
    inferred = with_input_shapes(model, shapes)
    out: dict[str, dict[str, float]] = {}
    for node, work in _works(inferred, _shape_table(inferred)):
        row = out.setdefault(node.op_type, {"nodes": 0, "macs": 0, "other": 0, "uncounted": 0})
        row["nodes"] += 1
        if work is None:
            row["uncounted"] += 1
        else:
            row["macs"] += work[0]
            row["other"] += work[1]
    return out


def _works(model, table: dict[str, list[int]]) -> Iterator[tuple[Any, tuple[int, int] | None]]:
    """Each node with its (multiply-accumulates, other operations), None where a shape it
    needs is unknown: the one walk both counts sum."""
    for node in model.graph.node:
        try:
            yield node, node_work(node, table)
        except (KeyError, IndexError):
            yield node, None


def node_work(node, table: dict[str, list[int]]) -> tuple[int, int]:
    """(multiply-accumulates, other operations) of one node at the shapes in ``table``;
    KeyError where a shape it needs is unknown."""

    def shape(name: str) -> list[int] | None:
        return table.get(name) if name else None

    op = node.op_type
    out = shape(node.output[0]) if node.output else None
    macs, other = 0, 0
    if op in CONV:
        w = shape(node.input[3] if op == "QLinearConv" else node.input[1])
        if out is None or w is None:
            raise KeyError
        macs = _prod(out) * _prod(w[1:])  # w: [Cout, Cin/group, *k]
    elif op == "ConvTranspose":
        x, w = shape(node.input[0]), shape(node.input[1])
        if x is None or w is None:
            raise KeyError
        macs = _prod(x) * _prod(w[1:])  # w: [Cin, Cout/group, *k]
    elif op in MATMUL:
        a = shape(node.input[0])
        if out is None or a is None:
            raise KeyError
        macs = _prod(out) * (a[-1] if len(a) > 1 else a[0])
    elif op in GEMM:
        a = shape(node.input[0])
        if out is None or a is None:
            raise KeyError
        k = a[0] if _attr(node, "transA", 0) else a[-1]
        macs = _prod(out) * k
    elif op in ELEMENTWISE or op in AFFINE or op in SOFTMAX:  # operations per output element
        if out is None:
            raise KeyError
        other = (1 if op in ELEMENTWISE else 2 if op in AFFINE else 5) * _prod(out)
    elif op in POOL:
        if out is None:
            raise KeyError
        other = _prod(out) * _prod(_attr(node, "kernel_shape", [1]))
    elif op in REDUCE:
        x = shape(node.input[0])
        if x is None:
            raise KeyError
        other = _prod(x)
    elif op in RECURRENT:
        x, w, r = shape(node.input[0]), shape(node.input[1]), shape(node.input[2])
        if x is None or w is None or r is None:
            raise KeyError
        seq_axis, batch_axis, d = _layout(node)
        steps = x[seq_axis] * x[batch_axis]
        # W: [directions, gates*hidden, input], R: [directions, gates*hidden, hidden]
        # (DynamicQuantizeLSTM transposes both: same sizes).
        macs = steps * (_prod(w) + _prod(r))
        hidden = _attr(node, "hidden_size") or r[-1]
        other = steps * d * hidden * RECURRENT[op][1]
    return macs, other


def _compulsory_bytes(model, table: dict[str, list[int]], batch_size: int) -> dict[str, Any]:
    """The least a batch must move through memory: every weight read once a batch
    (``weight_bytes``), the inputs read and the outputs written (``io_bytes_per_sample``;
    None where a shape is unknown); ``compulsory_bytes_per_sample`` puts them together at
    any batch.  A lower bound (activations that spill out of the caches move too), so the
    intensity it gives is an upper bound: the roofline's model points sit at or right of
    the truth."""
    from onnx.helper import tensor_dtype_to_np_dtype

    def nbytes(name: str, elem_type: int) -> int | None:
        dims = table.get(name)
        if dims is None:
            return None
        return _prod(dims) * tensor_dtype_to_np_dtype(elem_type).itemsize

    weights = sum(
        _prod(t.dims) * tensor_dtype_to_np_dtype(t.data_type).itemsize for t in model.graph.initializer
    )
    fixed = {t.name for t in model.graph.initializer}
    edges = [
        nbytes(v.name, v.type.tensor_type.elem_type)
        for v in list(model.graph.input) + list(model.graph.output)
        if v.name not in fixed
    ]
    io = None if any(e is None for e in edges) else sum(edges) / batch_size
    return {"weight_bytes": weights, "io_bytes_per_sample": io}


def compulsory_bytes_per_sample(flops: dict[str, Any], batch_size: int) -> float | None:
    """Weights once a batch plus each sample's inputs and outputs (``_compulsory_bytes``)."""
    w, io = flops.get("weight_bytes"), flops.get("io_bytes_per_sample")
    return None if w is None or io is None else w / batch_size + io
