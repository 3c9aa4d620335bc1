"""MindSpore -> ONNX (``mindspore.onnx.export``) and -> MindIR (``mindspore.export``).

MindIR is what an Ascend deployment loads (MindSpore Lite, ``nn.GraphCell``);
ONNX is what every other runtime loads.

Rewrites happen before export, and the result records them.  The model
family may offer its own for ONNX (``family_onnx_rewrites``: BERT replaces the
exact GELU, whose ``Erf`` the exporter cannot convert).  This module's own: MindSpore
implements ``nn.MaxPool2d(pad_mode="pad")`` with ``MaxPool3DWithArgmax``,
which its ONNX exporter cannot convert ("Exporting MaxPool3DWithArgmax
operator is not yet supported") and which breaks a MindIR with a dynamic
batch (its shape function fails on load).  Each such pool is replaced by an
explicit zero ``Pad`` followed by a ``valid`` max pool.  That is exact when
the pooled tensor is non-negative — in ResNet the stem pool follows a ReLU,
and every window holds at least one real pixel, so a padded zero never wins —
and the verifier checks the exported file against the unmodified network
either way.  (The cell lives in this file because GRAPH_MODE compiles the
source of ``construct``.)

MindSpore's ONNX exporter ignores ``dynamic_axes``: the file comes out with
the traced batch baked into its I/O shapes; ``converters.onnx_io.normalize_io``
makes the batch symbolic afterwards, and the verifier's batch-8 run proves the
graph really takes any batch.  It also bakes the traced batch into the
``Reshape``s that ``nn.LSTM`` uses to add and drop a size-1 axis; those are
rewritten as ``Unsqueeze``/``Squeeze`` (``unbake_reshapes``, exact, recorded
as rewrites).  Token inputs are exported at their fixed sequence length (the
exporter bakes it too, into the LSTM's reversal of the sequence).
"""

from __future__ import annotations

import importlib
import os

os.environ.setdefault("GLOG_v", "3")

from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn, ops

from dlbench.converters.base import (
    ConversionError,
    ExportHop,
    ExportOptions,
)
from dlbench.converters.onnx_io import BATCH_DIM, OUTPUT_NAME, input_names


class ZeroPadMaxPool(nn.Cell):
    """``MaxPool2d(pad_mode="pad")`` as Pad + valid MaxPool: exporters know both."""

    def __init__(self, kernel_size, stride, pad_h: int, pad_w: int):
        super().__init__()
        self.pad = ops.Pad(((0, 0), (0, 0), (pad_h, pad_h), (pad_w, pad_w)))
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, pad_mode="valid")

    def construct(self, x):
        return self.pool(self.pad(x))


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[-2]), int(v[-1]))


def replace_child(parent: nn.Cell, name: str, new: nn.Cell) -> None:
    """Put ``new`` in ``parent`` under ``name`` so that ``construct`` really calls it.

    A ``SequentialCell`` iterates a cached ``cell_list``, not ``_cells``: only its
    own ``__setitem__`` updates both.
    """
    if isinstance(parent, nn.SequentialCell):
        parent[list(parent.name_cells()).index(name)] = new
    else:
        parent._cells[name] = new


def family_onnx_rewrites(spec: Any, net: nn.Cell) -> list[str]:
    """Rewrites the model family offers for ONNX export, applied to ``net``.

    A family whose network uses an operator the exporter cannot convert offers
    ``onnx_rewrites(net) -> [description]`` in its MindSpore builder's module
    (BERT: exact GELU's ``Erf``); the verifier still judges the file against the
    unmodified network.
    """
    target = getattr(spec, "builders", {}).get("mindspore") if spec is not None else None
    if not target:
        return []
    hook = getattr(importlib.import_module(target.partition(":")[0]), "onnx_rewrites", None)
    return list(hook(net)) if hook else []


def rewrite_padded_pools(net: nn.Cell) -> list[str]:
    """Replace every padded ``nn.MaxPool2d`` in ``net``; return the names replaced."""
    replaced = []
    for parent_name, parent in list(net.cells_and_names()):
        for name, child in list(parent.name_cells().items()):
            if not (isinstance(child, nn.MaxPool2d) and getattr(child, "use_pad", False)):
                continue
            if getattr(child, "return_indices", False):
                continue
            pads = tuple(int(p) for p in child.padding)
            pad_h, pad_w = pads[-2], pads[-1]
            replace_child(
                parent, name, ZeroPadMaxPool(_pair(child.kernel_size), _pair(child.stride), pad_h, pad_w)
            )
            replaced.append(f"{parent_name + '.' if parent_name else ''}{name}")
    return replaced


def _export_onnx(net, examples, names, out: Path, options: ExportOptions) -> str:
    axes = (
        {**{n: {0: BATCH_DIM} for n in names}, OUTPUT_NAME: {0: BATCH_DIM}} if options.dynamic_batch else None
    )
    try:
        import mindspore.onnx as ms_onnx
    except ImportError:
        ms_onnx = None
    if ms_onnx is not None and hasattr(ms_onnx, "export"):
        ms_onnx.export(
            net,
            *examples,
            file_name=str(out),
            input_names=list(names),
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
        )
        return "mindspore.onnx.export"
    ms.export(net, *examples, file_name=str(out), file_format="ONNX")  # MindSpore < 2.6
    return "mindspore.export(file_format='ONNX')"


def unbake_reshapes(path: Path, batch: int) -> list[str]:
    """Rewrite every traced ``Reshape`` that only inserts or removes one size-1 axis
    as ``Unsqueeze``/``Squeeze`` of that axis; return what was rewritten.

    MindSpore's exporter writes the shapes it traced as constants, so the
    ``ExpandDims`` and output reshapes inside ``nn.LSTM`` carry the traced
    batch.  Inserting or removing one size-1 axis is exactly what the
    replacement does, at any batch.  The trace batch is ``TRACE_BATCH`` (not
    1), so a size-1 axis is never the batch itself, and which axis moved is
    unambiguous; a Reshape that does more is left alone (if it bakes the
    batch, the verifier's second batch size fails the file).
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    g = model.graph
    # Shapes as traced: the inputs' batch (symbolic where the exporter kept
    # dynamic_axes) is the trace batch the constants were written for.
    traced = onnx.ModelProto()
    traced.CopyFrom(model)
    for vi in traced.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if len(dims) and not dims[0].HasField("dim_value"):
            dims[0].Clear()
            dims[0].dim_value = batch
    try:
        inferred = onnx.shape_inference.infer_shapes(traced).graph
    except Exception:  # noqa: BLE001 - leave the file to the checker
        return []
    shapes = {}
    for vi in (*inferred.value_info, *inferred.input, *inferred.output):
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for node in g.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].HasField("t"):
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 11)

    def one_axis(longer: list[int], shorter: list[int]) -> int | None:
        for k, d in enumerate(longer):
            if d == 1 and longer[:k] + longer[k + 1 :] == shorter:
                return k
        return None

    done = []
    for i, node in enumerate(g.node):
        if node.op_type != "Reshape" or node.input[1] not in consts or node.input[0] not in shapes:
            continue
        before, after = shapes[node.input[0]], [int(v) for v in consts[node.input[1]].ravel()]
        if any(v <= 0 for v in after):
            continue
        if len(after) == len(before) + 1 and (axis := one_axis(after, before)) is not None:
            op = "Unsqueeze"
        elif len(before) == len(after) + 1 and (axis := one_axis(before, after)) is not None:
            op = "Squeeze"
        else:
            continue
        name = f"{node.name or node.output[0]}_as_{op}"
        if opset >= 13:
            axes = f"{node.output[0]}__axes"
            g.initializer.append(numpy_helper.from_array(np.array([axis], np.int64), axes))
            new = helper.make_node(op, [node.input[0], axes], list(node.output), name=name)
        else:
            new = helper.make_node(op, [node.input[0]], list(node.output), name=name, axes=[axis])
        g.node[i].CopyFrom(new)
        done.append(f"{node.name or node.output[0]}: Reshape {before} -> {after} as {op}(axis {axis})")
    if done:
        onnx.save(model, str(path))
    return done


# The batch a dynamic-batch ONNX export is traced at: not 1, so that
# ``unbake_reshapes`` can tell the batch axis from inserted size-1 axes.
TRACE_BATCH = 2


class MindSporeToOnnx(ExportHop):
    name = "mindspore->onnx"
    source = framework = "mindspore"
    targets = ("onnx", "mindir")

    @staticmethod
    def version() -> dict[str, str]:
        return {"mindspore": ms.__version__}

    def export(self, model: nn.Cell, spec: Any, out: Path, options: ExportOptions) -> dict[str, Any]:
        model.set_train(False)
        replaced = rewrite_padded_pools(model)
        rewrites = [f"{n}: MaxPool2d(pad_mode='pad') -> Pad(0) + MaxPool2d(valid)" for n in replaced]
        out = Path(out)
        # Zeros in each input's dtype: a valid image and a valid token id alike.
        dtypes = [
            np.dtype(i.dtype) if i.dtype.startswith("int") else np.dtype(np.float32) for i in spec.inputs
        ]
        if options.format == "onnx":
            batch = TRACE_BATCH if options.dynamic_batch else options.batch_size
            examples = [ms.Tensor(np.zeros((batch, *i.shape), dt)) for i, dt in zip(spec.inputs, dtypes)]
            rewrites += family_onnx_rewrites(spec, model)
            how = _export_onnx(model, examples, input_names(spec), out, options)
            if options.dynamic_batch and out.is_file():
                rewrites += [f"{r} (batch-independent)" for r in unbake_reshapes(out, batch)]
        elif options.format == "mindir":
            if out.suffix != ".mindir":
                raise ConversionError(f"{out}: a MindIR file must end in .mindir")
            batch = None if options.dynamic_batch else options.batch_size
            examples = [
                ms.Tensor(shape=[batch, *i.shape], dtype=getattr(ms, dt.name))
                for i, dt in zip(spec.inputs, dtypes)
            ]
            ms.export(model, *examples, file_name=str(out.with_suffix("")), file_format="MINDIR")
            how = "mindspore.export(file_format='MINDIR')"
        else:
            raise ConversionError(f"--format {options.format}: MindSpore exports onnx or mindir")
        if not out.is_file():
            raise RuntimeError(f"{how} reported success but wrote no {out.name}")
        return {
            "exporter": how,
            "opset_requested": options.opset if options.format == "onnx" else None,
            "rewrites": rewrites,
        }

    def export_user(
        self,
        model: nn.Cell,
        source: Any,
        signature: list,
        output_names: list[str],
        example: tuple,
        out: Path,
        options: ExportOptions,
    ) -> dict[str, Any]:
        """A user's Cell, traced at ``example`` with its own input and output names.  The
        exporter bakes the traced shapes in; the caller names the batch dimension and the
        verifier's other batch size shows whether the graph really takes any batch."""
        if source.kind == "mindir":
            raise ConversionError(
                f"{source.label}: MindSpore exports ONNX from a network's "
                f"code, not from a MindIR graph: give --model-from "
                f"FILE.py:CALLABLE"
            )
        model.set_train(False)
        replaced = rewrite_padded_pools(model)
        names = [t.name for t in signature]
        import mindspore.onnx as ms_onnx

        axes = {n: {0: BATCH_DIM} for n in [*names, *output_names]} if options.dynamic_batch else None
        ms_onnx.export(
            model,
            *[ms.Tensor(a) for a in example],
            file_name=str(out),
            input_names=names,
            output_names=list(output_names),
            dynamic_axes=axes,
        )
        rewrites = [f"{n}: MaxPool2d(pad_mode='pad') -> Pad(0) + MaxPool2d(valid)" for n in replaced]
        if options.dynamic_batch and out.is_file():
            rewrites += [f"{r} (batch-independent)" for r in unbake_reshapes(out, len(example[0]))]
        return {"exporter": "mindspore.onnx.export", "opset_requested": options.opset, "rewrites": rewrites}


HOP = MindSporeToOnnx()
