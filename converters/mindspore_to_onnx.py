"""MindSpore -> ONNX (``mindspore.onnx.export``) and -> MindIR (``mindspore.export``).

MindIR is what an Ascend deployment loads (MindSpore Lite, ``nn.GraphCell``);
ONNX is what every other runtime loads.

One rewrite happens before export, and the result records it: MindSpore
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
batch 1 baked into its I/O shapes; ``converters.onnx_io.normalize_io`` makes
the batch symbolic afterwards, and the verifier's batch-8 run proves the
graph really takes any batch.
"""
from __future__ import annotations

import os

os.environ.setdefault("GLOG_v", "3")

from pathlib import Path  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402
import mindspore as ms  # noqa: E402
from mindspore import nn, ops  # noqa: E402

from converters.base import ExportHop, ExportOptions  # noqa: E402
from converters.onnx_io import BATCH_DIM, INPUT_NAME, OUTPUT_NAME  # noqa: E402
from harness.errors import UserError, first_line  # noqa: E402


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
            parent._cells[name] = ZeroPadMaxPool(_pair(child.kernel_size), _pair(child.stride),
                                                 pad_h, pad_w)
            replaced.append(f"{parent_name + '.' if parent_name else ''}{name}")
    return replaced


def _export_onnx(net, example, out: Path, options: ExportOptions) -> str:
    axes = {INPUT_NAME: {0: BATCH_DIM}, OUTPUT_NAME: {0: BATCH_DIM}} if options.dynamic_batch else None
    try:
        import mindspore.onnx as ms_onnx
    except ImportError:
        ms_onnx = None
    if ms_onnx is not None and hasattr(ms_onnx, "export"):
        ms_onnx.export(net, example, file_name=str(out), input_names=[INPUT_NAME],
                       output_names=[OUTPUT_NAME], dynamic_axes=axes)
        return "mindspore.onnx.export"
    ms.export(net, example, file_name=str(out), file_format="ONNX")     # MindSpore < 2.6
    return "mindspore.export(file_format='ONNX')"


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
        shape = tuple(spec.inputs[0].shape)
        out = Path(out)
        if options.format == "onnx":
            batch = 1 if options.dynamic_batch else options.batch_size
            example = ms.Tensor(np.zeros((batch, *shape), np.float32))
            how = _export_onnx(model, example, out, options)
        elif options.format == "mindir":
            if out.suffix != ".mindir":
                raise UserError(f"{out}: a MindIR file must end in .mindir")
            batch = None if options.dynamic_batch else options.batch_size
            example = ms.Tensor(shape=[batch, *shape], dtype=ms.float32)
            ms.export(model, example, file_name=str(out.with_suffix("")), file_format="MINDIR")
            how = "mindspore.export(file_format='MINDIR')"
        else:
            raise UserError(f"--format {options.format}: MindSpore exports onnx or mindir")
        if not out.is_file():
            raise RuntimeError(f"{how} reported success but wrote no {out.name}")
        return {"exporter": how, "opset_requested": options.opset if options.format == "onnx"
                else None, "rewrites": rewrites}


def run_mindir(path: str | Path, batches: Sequence[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Outputs of a MindIR file (``mindspore.load`` + ``nn.GraphCell``) per batch."""
    try:
        graph = ms.load(str(path))
    except (RuntimeError, ValueError, OSError) as exc:
        first = first_line(exc)
        raise UserError(f"{path}: MindSpore {ms.__version__} cannot load this MindIR ({first})") from None
    cell = nn.GraphCell(graph)
    return [{OUTPUT_NAME: cell(ms.Tensor(np.ascontiguousarray(x))).asnumpy()} for x in batches]


HOP = MindSporeToOnnx()
