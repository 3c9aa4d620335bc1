"""ONNX (fp32) -> INT8 ONNX with ONNX Runtime's quantization tools.

Static quantization (the default) is the recipe for CNNs:

1. ``quant_pre_process`` — symbolic shape inference and ONNX Runtime's graph
   optimizations (BatchNorm folded into Conv, constants folded), so that
   quantization sees the graph the runtime will run;
2. calibration over a representative set, which the caller hands in as
   batches (``dlbench build`` reads ``--calib-data FILE.npz``, a bundled data
   set's training split, or makes synthetic class-pattern images from a seed
   the verifier never uses: ``harness.convert.calibration``); MinMax ranges;
3. ``quantize_static`` to QDQ format, weights int8 per output channel,
   except the nodes ``converters.int8_recipe`` leaves in float (fixed-range
   ops such as a Softmax at the graph outputs, and the user's
   ``--exclude-nodes`` / ``--exclude-op-types``), each listed with its reason
   in ``recipe.float_nodes``.

Two flavours of Q/DQ, because two consumers want different ones
(``--target``):

* ``cpu`` (default): activations uint8 (asymmetric), weights int8
  (symmetric).  ONNX Runtime's CPU kernels fuse each DequantizeLinear →
  Conv → QuantizeLinear into a u8×s8 QLinearConv, the combination x86's
  VNNI instructions (vpdpbusd) multiply natively;
* ``tensorrt``: activations and weights both int8 and symmetric (zero point
  0), the only Q/DQ TensorRT accepts (used by the TensorRT hop's strongly
  typed path).

Dynamic quantization (``--dynamic``) quantizes weights ahead of time and
activations per batch at run time (no calibration): the usual choice for
LSTM and Transformer models, whose activation ranges vary by input.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlbench.converters import int8_recipe, onnx_io, onnx_normalize, onnx_summary
from dlbench.converters.base import BuildHop, BuildOptions, ConversionError
from dlbench.converters.ort_tools import kept_log
from dlbench.core.atomic import scratch
from dlbench.core.errors import first_line

TARGETS = ("cpu", "tensorrt")


def _quantization():
    from dlbench.converters.ort_tools import without_torch

    without_torch()
    try:
        from onnxruntime import quantization
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError:
        raise ConversionError("onnxruntime is not installed: pip install 'dlbench[onnx]'") from None
    return quantization, quant_pre_process


# Per-channel Q/DQ (DequantizeLinear's ``axis``) exists from opset 13 on: an older
# graph is raised to it before it gets here (``onnx_normalize``, verified by the caller).
QDQ_MIN_OPSET = 13


def _rows(batch) -> int:
    return int((batch[0] if isinstance(batch, (tuple, list)) else batch).shape[0])


class _Reader:
    """ONNX Runtime's CalibrationDataReader protocol over prepared batches."""

    def __init__(self, names: list[str], batches: list):
        self.names, self.batches, self.index = names, batches, 0

    def get_next(self):
        if self.index >= len(self.batches):
            return None
        self.index += 1
        x = self.batches[self.index - 1]
        return dict(zip(self.names, x if isinstance(x, (tuple, list)) else (x,)))

    def rewind(self):
        self.index = 0


def prepare(source: Path, out: Path) -> dict[str, Any]:
    """The graph the quantizer sees, written to ``out``: ``quant_pre_process``, every node
    named.  ``source`` is already normalized (``onnx_normalize``: frozen, opset 13, folded).
    Deterministic, so the per-layer error report can rebuild the float graph whose tensor
    names the INT8 model kept; returns what it did."""
    _, pre_process = _quantization()
    info: dict[str, Any] = {}
    src = str(Path(source).resolve())
    out = Path(out).resolve()
    # In a scratch directory: a failing symbolic shape inference saves its partial
    # model (sym_shape_infer_temp.onnx + external data) in the cwd.
    with scratch("dlbench-pre") as tmp, contextlib.chdir(tmp):
        try:
            pre_process(src, str(out))
            info["quant_pre_process"] = True
        except Exception as exc:  # noqa: BLE001 - the tool raises a bare Exception
            # Its symbolic shape inference gives up on some exporters' graphs
            # (MindSpore's LSTM weight plumbing); the other two steps still apply.
            pre_process(src, str(out), skip_symbolic_shape=True)
            info["quant_pre_process"] = f"without symbolic shape inference ({first_line(exc)})"
    onnx = onnx_io.onnx()
    model = onnx.load(str(out))
    named = int8_recipe.name_nodes(model.graph)  # first: a copied bias is named by its node
    flattened = int8_recipe.flat_gemm_biases(model.graph)
    if flattened:
        info["gemm_biases_flattened"] = flattened
    if named + flattened:
        onnx.save(model, str(out))
    return info


def check_fixed_weights(graph, label: str) -> None:
    """Refuse, in one line, weights the caller may still override at run time (initializers
    kept as graph inputs by --no-freeze): the quantizer cannot fix their scales."""
    kept = onnx_normalize.initializer_inputs(graph)
    if kept:
        raise ConversionError(
            f"--no-freeze: {len(kept)} initializers of {label} stay graph "
            f"inputs, so its weights may change at run time and INT8 cannot "
            f"fix their scales; build it without --no-freeze"
        )


def _check_normalized(model, label: str, min_opset: int) -> None:
    """What the quantizer cannot bear, refused in one line instead of its own error."""
    check_fixed_weights(model.graph, label)
    opset = onnx_normalize.opset_of(model)
    if opset is not None and opset < min_opset:
        raise ConversionError(
            f"opset {opset}: per-channel Q/DQ needs opset {min_opset} or "
            f"later (dlbench build raises it first)"
        )


class OnnxToInt8(BuildHop):
    name = "onnx->int8"
    targets = ("int8",)
    precision = "int8"
    suffix = ".int8.onnx"
    min_opset = QDQ_MIN_OPSET
    options = (
        "calib_data",
        "calib_size",
        "calib_batch",
        "dynamic",
        "per_channel",
        "target",
        "exclude_nodes",
        "exclude_op_types",
        "quantize_op_types",
        "float_tail",
    )
    summary = (
        "ONNX Runtime quantization: static QDQ with per-channel weights calibrated on "
        "--calib-data, or --dynamic"
    )

    def calibrates(self, options: BuildOptions) -> bool:
        """Unless --dynamic: a graph left to choose may turn out static."""
        return options.dynamic is not True

    def check_source(self, model, label: str, options: BuildOptions) -> None:
        if not options.freeze:
            check_fixed_weights(model.graph, label)

    def check_available(self, options: BuildOptions) -> None:
        _quantization()
        if options.target not in TARGETS:
            raise ConversionError(f"--target {options.target}: choose from {', '.join(TARGETS)}")

    def build(
        self,
        source: Path,
        out: Path,
        options: BuildOptions,
        *,
        calibration: Sequence[Any] | None = None,
        calibration_source: str = "given",
        **_: Any,
    ) -> dict[str, Any]:
        """Static quantization calibrates on ``calibration`` (batches: one array, or a tuple
        in the graph's input order); the caller chooses and describes them."""
        quant, _ = _quantization()
        import onnxruntime

        source_model = onnx_io.load(source, check=False)
        _check_normalized(source_model, source.name, self.min_opset)
        declared = int8_recipe.declared_mode(source_model)  # before preparing drops the metadata

        info: dict[str, Any] = {"tool": f"onnxruntime {onnxruntime.__version__} quantization"}
        # What the quantizer logged, by message: filled as the build ends (ort_tools.kept_log).
        said = info["quantizer_log"] = {}
        with scratch("dlbench-int8") as tmp, kept_log(said):
            pre = Path(tmp, "pre.onnx")
            info.update(prepare(source, pre))
            pre_model = onnx_io.load(pre, check=False)
            dynamic, chosen_by = int8_recipe.choose_mode(pre_model.graph, options.dynamic, declared)
            if not dynamic and not calibration:
                raise ConversionError("static INT8 quantization needs calibration batches")
            floats = int8_recipe.float_nodes(pre_model.graph, source_model.graph, options, static=not dynamic)
            del source_model  # a folded VGG19 holds 0.5 GB of weights
            exclude = [d["node"] for d in floats]
            only = int8_recipe.quantized_types(options.quantize_op_types, quant, dynamic=dynamic)
            if dynamic:
                quant.quantize_dynamic(
                    str(pre),
                    str(out),
                    per_channel=options.per_channel,
                    weight_type=quant.QuantType.QInt8,
                    nodes_to_exclude=exclude,
                    op_types_to_quantize=only,
                )
                info["recipe"] = {
                    "mode": "dynamic",
                    "mode_chosen_by": chosen_by,
                    "weights": "int8",
                    "per_channel": options.per_channel,
                    "activations": "uint8, quantized per batch at run time",
                    "float_nodes": floats,
                    "quantized_op_types": only or "every type the quantizer handles",
                }
                return info
            batches = list(calibration)
            names = [i.name for i in onnx_summary.summarize(pre_model).inputs]
            symmetric = options.target == "tensorrt"
            activation = quant.QuantType.QInt8 if symmetric else quant.QuantType.QUInt8
            extra = {"ActivationSymmetric": symmetric, "WeightSymmetric": True}

            passes = 0
            if _two_d_gemm_bias(pre_model.graph):  # known to fail: skip it, calibrate once
                extra[INT32_BIAS_OFF] = True

            def static() -> None:
                nonlocal passes
                passes += 1
                quant.quantize_static(
                    str(pre),
                    str(out),
                    _Reader(names, batches),
                    quant_format=quant.QuantFormat.QDQ,
                    per_channel=options.per_channel,
                    reduce_range=False,
                    activation_type=activation,
                    weight_type=quant.QuantType.QInt8,
                    calibrate_method=quant.CalibrationMethod.MinMax,
                    nodes_to_exclude=exclude,
                    op_types_to_quantize=only,
                    extra_options=extra,
                )

            try:
                static()
            except ValueError as exc:
                # The QDQ quantizer's int32-bias adjustment compares a scale array as if it
                # were one number when a Gemm's bias is 2-D ([1, N], what a MatMul + Add of
                # a row vector fuses into): onnxruntime issue 24815.  Without the
                # adjustment the bias is quantized as before that step existed.
                if not _raised_in(exc, "_adjust_weight_scale_for_int32_bias"):
                    raise
                extra[INT32_BIAS_OFF] = True
                static()
            info["recipe"] = {
                "mode": "static",
                "mode_chosen_by": chosen_by,
                "format": "QDQ",
                "target": options.target,
                "activations": "int8 symmetric" if symmetric else "uint8 asymmetric",
                "weights": "int8 symmetric",
                "per_channel": options.per_channel,
                "calibration_method": "MinMax",
                "reduce_range": False,
                "int32_bias_weight_adjust": not extra.get(INT32_BIAS_OFF, False),
                "float_tail": options.float_tail,
                "float_nodes": floats,
                "quantized_op_types": only or "every type the quantizer handles",
            }
            info["calibration"] = {
                "source": calibration_source,
                "samples": int(sum(_rows(b) for b in batches)),
                "batch": _rows(batches[0]),
                "passes": passes,
            }
        return info


HOP = OnnxToInt8()


INT32_BIAS_OFF = "QDQDisableWeightAdjustForInt32Bias"


def _two_d_gemm_bias(graph) -> bool:
    """A Gemm whose bias is a 2-D initializer, which ONNX Runtime's int32-bias adjustment
    fails on (issue 24815) only after the whole calibration has run: seen first, the step
    is left out and the model calibrated once, not twice.  A [1, N] row is flattened
    before (``int8_recipe.flat_gemm_biases``): what is left is an [M, N] bias."""
    shapes = {t.name: len(t.dims) for t in graph.initializer}
    return any(n.op_type == "Gemm" and len(n.input) > 2 and shapes.get(n.input[2]) == 2 for n in graph.node)


def _raised_in(exc: BaseException, function: str) -> bool:
    """Whether ``exc`` was raised inside ``function`` (any frame of its traceback)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == function:
            return True
        tb = tb.tb_next
    return False
