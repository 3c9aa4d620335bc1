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
from dlbench.converters.base import BuildHop, BuildOptions, ConversionError


def _converter():
    try:
        import onnxconverter_common
        from onnxconverter_common.float16 import convert_float_to_float16

        return convert_float_to_float16, f"onnxconverter-common {onnxconverter_common.__version__}"
    except ImportError:
        pass
    try:
        import onnxruntime
        from onnxruntime.transformers.float16 import convert_float_to_float16

        return convert_float_to_float16, f"onnxruntime {onnxruntime.__version__} transformers.float16"
    except ImportError as exc:
        # ONNX Runtime installed without its transformers tools (a trimmed wheel) is told
        # apart from no ONNX Runtime at all: the advice differs.
        why = f" ({exc})" if exc.name != "onnxruntime" else ""
        raise ConversionError(
            f"no float16 converter{why}: pip install 'dlbench[onnx]' "
            "(onnxruntime ships one) or onnxconverter-common"
        ) from None


class OnnxToFp16(BuildHop):
    name = "onnx->fp16"
    targets = ("fp16",)
    precision = "fp16"
    suffix = ".fp16.onnx"
    options = ("keep_io_types",)
    summary = "float16 weights and compute, float32 I/O unless --no-keep-io-types"

    def check_available(self, options: BuildOptions) -> None:
        _converter()

    def build(self, source: Path, out: Path, options: BuildOptions, **_: Any) -> dict[str, Any]:
        convert, tool = _converter()
        model = onnx_io.load(source, check=False)
        converted = convert(model, keep_io_types=options.keep_io_types)
        dropped = _drop_repeated_nodes(converted)
        retyped = _type_value_info_as_initializers(converted)
        onnx_io.toposort(converted)  # the converter appends its I/O casts at the end
        onnx_io.save(converted, out)
        return {
            "tool": tool,
            "keep_io_types": options.keep_io_types,
            **({"repeated_casts_dropped": dropped} if dropped else {}),
            **({"value_info_retyped": retyped} if retyped else {}),
        }


def _type_value_info_as_initializers(model) -> list[str]:
    """An initializer the converter kept in float32 (a Resize's scales: ops that must read
    float32 there are on its block list) can keep a value_info entry it rewrote to float16;
    the checker's type inference then rejects the file.  The initializer is what runs:
    its type wins."""
    dtypes = {t.name: t.data_type for t in model.graph.initializer}
    fixed = []
    for info in model.graph.value_info:
        want = dtypes.get(info.name)
        if want is not None and info.type.tensor_type.elem_type != want:
            info.type.tensor_type.elem_type = want
            fixed.append(info.name)
    return fixed


def _drop_repeated_nodes(model) -> int:
    """The converter casts a float16 tensor back to float32 once per consumer it keeps in
    float32, naming every cast after the tensor: a tensor read by four such ops (the
    four ``Min`` clamps of RoIAlign's coordinates) gets four identical ``Cast`` nodes
    with one output name, which breaks single assignment and fails the checker.  The
    copies compute the same thing; keep the first.  Two DIFFERENT nodes with one output
    name are a real conflict and fail the build."""
    first: dict[str, bytes] = {}
    keep, dropped = [], 0
    for node in model.graph.node:
        body = node.SerializeToString(deterministic=True)
        clash = [o for o in node.output if o and o in first]
        if not clash:
            first.update({o: body for o in node.output if o})
            keep.append(node)
        elif all(first[o] == body for o in clash):
            dropped += 1
        else:
            raise ConversionError(f"the float16 converter wrote two different nodes named {clash[0]!r}")
    if dropped:
        del model.graph.node[:]
        model.graph.node.extend(keep)
    return dropped


HOP = OnnxToFp16()
