"""PyTorch -> ONNX with ``torch.onnx.export``.

The TorchScript exporter is the default: it needs nothing beyond torch, and
torch 2.13 still ships it (``dynamo=False``; the call warns that it is
legacy).  ``exporter="dynamo"`` uses the torch.export-based exporter, which
needs ``onnxscript``; without it the export is refused with that reason.
Constant folding folds each BatchNorm into its convolution in eval mode.
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import torch

from converters.base import ExportHop, ExportOptions
from converters.onnx_io import BATCH_DIM, INPUT_NAME, OUTPUT_NAME
from harness.errors import UserError


class TorchToOnnx(ExportHop):
    name = "pytorch->onnx"
    source = framework = "pytorch"
    targets = ("onnx",)

    @staticmethod
    def version() -> dict[str, str]:
        return {"torch": torch.__version__}

    def export(self, model: torch.nn.Module, spec: Any, out: Path,
               options: ExportOptions) -> dict[str, Any]:
        if options.format != "onnx":
            raise UserError(f"--format {options.format}: PyTorch exports ONNX only")
        batch = 1 if options.dynamic_batch else options.batch_size
        example = torch.zeros((batch, *spec.inputs[0].shape), dtype=torch.float32)
        model = model.cpu().eval()
        kwargs: dict[str, Any] = dict(input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                                      opset_version=options.opset)
        if options.exporter == "dynamo":
            if importlib.util.find_spec("onnxscript") is None:
                raise UserError("--exporter dynamo needs onnxscript: pip install onnxscript "
                                "(or use the default TorchScript exporter)")
            if options.dynamic_batch:
                kwargs["dynamic_shapes"] = ({0: torch.export.Dim(BATCH_DIM)},)
            kwargs["dynamo"] = True
            kwargs["external_data"] = False
        elif options.exporter == "torchscript":
            kwargs["dynamo"] = False
            kwargs["do_constant_folding"] = True
            if options.dynamic_batch:
                kwargs["dynamic_axes"] = {INPUT_NAME: {0: BATCH_DIM}, OUTPUT_NAME: {0: BATCH_DIM}}
        else:
            raise UserError(f"--exporter {options.exporter}: choose torchscript or dynamo")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # "legacy TorchScript-based ONNX export"
            with torch.inference_mode(False), torch.no_grad():
                torch.onnx.export(model, (example,), str(out), **kwargs)
        return {"exporter": f"torch.onnx.export ({options.exporter})",
                "opset_requested": options.opset, "rewrites": []}


HOP = TorchToOnnx()
