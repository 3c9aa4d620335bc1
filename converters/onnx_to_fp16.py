"""ONNX (fp32) -> float16 ONNX for GPU execution providers and TensorRT's strongly typed path.

Weights and compute become float16; with ``keep_io_types`` (the default) the
graph keeps float32 inputs and outputs and casts at its edges, so callers
feed the same arrays as for the fp32 model.  The converter is
onnxconverter-common's ``convert_float_to_float16`` where that package is
installed, else the same function ONNX Runtime ships in
``onnxruntime.transformers.float16`` (no extra dependency).

What the CPU verdict covers: ONNX Runtime's CPU provider lacks float16
kernels for most ops and wraps those nodes in casts to float32 (its
InsertCastTransformer), so on the CPU the verifier sees float16 weights and
float16 tensors between nodes, not float16 accumulation.  On a GPU execution
provider or TensorRT, the same file computes in float16 and is verified there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.converters import onnx_io
from dlbench.converters.base import BuildHop, BuildOptions
from dlbench.converters.base import ConversionError


def _converter():
    try:
        from onnxconverter_common.float16 import convert_float_to_float16

        import onnxconverter_common
        return convert_float_to_float16, f"onnxconverter-common {onnxconverter_common.__version__}"
    except ImportError:
        pass
    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16

        import onnxruntime
        return convert_float_to_float16, f"onnxruntime {onnxruntime.__version__} transformers.float16"
    except ImportError:
        raise ConversionError("no float16 converter: pip install 'dlbench[onnx]' "
                        "(onnxruntime ships one) or onnxconverter-common") from None


class OnnxToFp16(BuildHop):
    name = "onnx->fp16"
    targets = ("fp16",)
    precision = "fp16"
    suffix = ".fp16.onnx"

    def check_available(self, options: BuildOptions) -> None:
        _converter()

    def build(self, source: Path, out: Path, options: BuildOptions, **_: Any) -> dict[str, Any]:
        convert, tool = _converter()
        model = onnx_io.load(source, check=False)
        converted = convert(model, keep_io_types=options.keep_io_types)
        onnx_io.toposort(converted)          # the converter appends its I/O casts at the end
        onnx_io.save(converted, out)
        return {"tool": tool, "keep_io_types": options.keep_io_types}


HOP = OnnxToFp16()
