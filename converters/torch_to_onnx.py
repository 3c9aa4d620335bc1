"""PyTorch -> ONNX with ``torch.onnx.export``.

The TorchScript exporter is the default: it needs nothing beyond torch, and
torch 2.13 still ships it (``dynamo=False``; the call warns that it is
legacy).  ``exporter="dynamo"`` uses the torch.export-based exporter, which
needs ``onnxscript``; without it the export is refused with that reason.
Constant folding folds each BatchNorm into its convolution in eval mode.
Token inputs (integer ids) keep a dynamic ``sequence`` dimension next to the
batch; an LSTM exports as ONNX ``LSTM`` nodes.
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import torch

from dlbench.converters.base import ExportHop, ExportOptions
from dlbench.converters.onnx_io import BATCH_DIM, OUTPUT_NAME, SEQUENCE_DIM, input_names
from dlbench.converters.base import ConversionError


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
            raise ConversionError(f"--format {options.format}: PyTorch exports ONNX only")
        batch = 1 if options.dynamic_batch else options.batch_size
        # Zeros in each input's dtype: a valid image and a valid token id alike.
        examples = tuple(torch.zeros((batch, *i.shape), dtype=getattr(torch, i.dtype))
                         for i in spec.inputs)
        tokens = [i.dtype.startswith("int") for i in spec.inputs]
        names = input_names(spec)
        model = model.cpu().eval()
        kwargs: dict[str, Any] = dict(input_names=names, output_names=[OUTPUT_NAME],
                                      opset_version=options.opset)
        if options.exporter == "dynamo":
            if importlib.util.find_spec("onnxscript") is None:
                raise ConversionError("--exporter dynamo needs onnxscript: pip install onnxscript "
                                "(or use the default TorchScript exporter)")
            batch_dim, seq_dim = torch.export.Dim(BATCH_DIM), torch.export.Dim(SEQUENCE_DIM)
            kwargs["dynamic_shapes"] = tuple(
                {**({0: batch_dim} if options.dynamic_batch else {}),
                 **({1: seq_dim} if token else {})} or None for token in tokens)
            kwargs["dynamo"] = True
            kwargs["external_data"] = False
        elif options.exporter == "torchscript":
            kwargs["dynamo"] = False
            kwargs["do_constant_folding"] = True
            # Token inputs keep a dynamic sequence length (the LSTM and attention take any).
            axes = {name: {**({0: BATCH_DIM} if options.dynamic_batch else {}),
                           **({1: SEQUENCE_DIM} if token else {})}
                    for name, token in zip(names, tokens)}
            if options.dynamic_batch:
                axes[OUTPUT_NAME] = {0: BATCH_DIM}
            kwargs["dynamic_axes"] = {k: v for k, v in axes.items() if v}
        else:
            raise ConversionError(f"--exporter {options.exporter}: choose torchscript or dynamo")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # "legacy TorchScript-based ONNX export"
            with torch.inference_mode(False), torch.no_grad():
                torch.onnx.export(model, examples, str(out), **kwargs)
        return {"exporter": f"torch.onnx.export ({options.exporter})",
                "opset_requested": options.opset, "rewrites": []}


HOP = TorchToOnnx()
