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

from dlbench.converters.base import ConversionError, ExportHop, ExportOptions
from dlbench.converters.onnx_io import BATCH_DIM, OUTPUT_NAME, SEQUENCE_DIM, input_names


class TorchToOnnx(ExportHop):
    name = "pytorch->onnx"
    source = framework = "pytorch"
    targets = ("onnx",)

    @staticmethod
    def version() -> dict[str, str]:
        return {"torch": torch.__version__}

    def export(self, model: torch.nn.Module, spec: Any, out: Path, options: ExportOptions) -> dict[str, Any]:
        if options.format != "onnx":
            raise ConversionError(f"--format {options.format}: PyTorch exports ONNX only")
        batch = 1 if options.dynamic_batch else options.batch_size
        # Zeros in each input's dtype: a valid image and a valid token id alike.
        examples = tuple(torch.zeros((batch, *i.shape), dtype=getattr(torch, i.dtype)) for i in spec.inputs)
        # Id sequences; a one-id input (DIN's candidate item) is none and keeps its length.
        tokens = [i.dtype.startswith("int") and tuple(i.shape) != (1,) for i in spec.inputs]
        names = input_names(spec)
        model = model.cpu().eval()
        kwargs: dict[str, Any] = dict(
            input_names=names, output_names=[OUTPUT_NAME], opset_version=options.opset
        )
        if options.exporter == "dynamo":
            if importlib.util.find_spec("onnxscript") is None:
                raise ConversionError(
                    "--exporter dynamo needs onnxscript: pip install onnxscript "
                    "(or use the default TorchScript exporter)"
                )
            batch_dim, seq_dim = torch.export.Dim(BATCH_DIM), torch.export.Dim(SEQUENCE_DIM)
            kwargs["dynamic_shapes"] = tuple(
                {**({0: batch_dim} if options.dynamic_batch else {}), **({1: seq_dim} if token else {})}
                or None
                for token in tokens
            )
            kwargs["dynamo"] = True
            kwargs["external_data"] = False
        elif options.exporter == "torchscript":
            kwargs["dynamo"] = False
            kwargs["do_constant_folding"] = True
            # Token inputs keep a dynamic sequence length (the LSTM and attention take any).
            axes = {
                name: {
                    **({0: BATCH_DIM} if options.dynamic_batch else {}),
                    **({1: SEQUENCE_DIM} if token else {}),
                }
                for name, token in zip(names, tokens)
            }
            if options.dynamic_batch:
                axes[OUTPUT_NAME] = {0: BATCH_DIM}
            kwargs["dynamic_axes"] = {k: v for k, v in axes.items() if v}
        else:
            raise ConversionError(f"--exporter {options.exporter}: choose torchscript or dynamo")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "legacy TorchScript-based ONNX export"
            with torch.inference_mode(False), torch.no_grad():
                torch.onnx.export(model, examples, str(out), **kwargs)
        return {
            "exporter": f"torch.onnx.export ({options.exporter})",
            "opset_requested": options.opset,
            "rewrites": [],
        }

    def export_user(
        self,
        model: Any,
        source: Any,
        signature: list,
        output_names: list[str],
        example: tuple,
        out: Path,
        options: ExportOptions,
    ) -> dict[str, Any]:
        """A user's model with its own input and output names; every dimension the
        signature leaves dynamic stays dynamic (named by its symbol, or NAME_dimI)."""
        from dlbench.models.user.pytorch import flatten

        if options.exporter != "torchscript":
            raise ConversionError(
                f"--exporter {options.exporter}: a user's model exports with the TorchScript exporter here"
            )
        names = [t.name for t in signature]
        axes = {}
        for t in signature:
            dims = {
                i: (BATCH_DIM if i == 0 else d if isinstance(d, str) else f"{t.name}_dim{i}")
                for i, d in enumerate(t.shape)
                if not isinstance(d, int)
            }
            if not options.dynamic_batch:
                dims.pop(0, None)
            if dims:
                axes[t.name] = dims
        if options.dynamic_batch:
            axes.update({n: {0: BATCH_DIM} for n in output_names})
        if isinstance(model, torch.jit.ScriptModule):
            target = model  # its outputs as they are: the exporter cannot write a dict
        else:

            class Flat(torch.nn.Module):  # dict / nested outputs as one flat tuple
                def __init__(self, inner):
                    super().__init__()
                    self.inner = inner

                def forward(self, *xs):
                    return tuple(flatten(self.inner(*xs)).values())

            target = Flat(model)
        tensors = tuple(torch.from_numpy(a) for a in example)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with torch.inference_mode(False), torch.no_grad():
                    # PRESERVE: the model is in eval mode already, and a torch.export
                    # module refuses the exporter's train(False).
                    torch.onnx.export(
                        target,
                        tensors,
                        str(out),
                        input_names=names,
                        output_names=list(output_names),
                        dynamo=False,
                        opset_version=options.opset,
                        dynamic_axes=axes,
                        do_constant_folding=True,
                        training=torch.onnx.TrainingMode.PRESERVE,
                    )
            except torch.onnx.errors.UnsupportedOperatorError as exc:
                hint = (
                    " (a TorchScript archive returning a dict: return a tuple, or save "
                    "it with torch.export.save)"
                    if "DictConstruct" in str(exc)
                    else ""
                )
                raise ConversionError(f"{source.label}: {str(exc).splitlines()[0]}{hint}") from None
        return {
            "exporter": "torch.onnx.export (torchscript)",
            "opset_requested": options.opset,
            "dynamic_axes": axes,
            "rewrites": [],
        }


HOP = TorchToOnnx()
