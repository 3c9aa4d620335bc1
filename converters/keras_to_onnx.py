"""TensorFlow / Keras 3 -> ONNX with tf2onnx.

``tf2onnx.convert.from_keras`` fails on Keras 3 models (``KeyError:
'keras_tensor_…'``), so the model is wrapped in a ``tf.function`` with an
explicit input signature, frozen by ``converters.tf_freeze`` (constants folded,
nested functions inlined, ops tf2onnx lacks rewritten) and that graph is
converted.  The wrapper takes NCHW and transposes to the network's NHWC, so a
Keras export takes the same input as the PyTorch and MindSpore ones; tf2onnx's
optimizer pushes the transpose into the first convolution (no Transpose node is
left: ``transposes_left`` in the result says so, and the node count shows it).

``large_model=True`` keeps the weights outside the protobuf while tf2onnx's
optimizer passes re-serialize the graph over and over: for ResNet-50 that
took about 12 s and 3.9 GB peak here instead of 25 s and 7 GB.  The weights
are put back inline before the file is written, so the result is one plain
.onnx file either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

from dlbench.converters.base import (
    ConversionError,
    ExportHop,
    ExportOptions,
)
from dlbench.converters.onnx_io import OUTPUT_NAME, input_names
from dlbench.converters.tf_freeze import convert


def _tf2onnx():
    try:
        import tf2onnx
    except ImportError:
        raise ConversionError("tf2onnx is not installed: pip install 'dlbench[tensorflow]'") from None
    return tf2onnx


def _tensors(graph):
    """Every TensorProto in ``graph``: initializers, node attributes, subgraphs."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _tensors(sub)


def inline_external_tensors(graph, data: dict[str, bytes]) -> int:
    """Put tf2onnx's ``large_model`` tensors back into the protobuf; return how many."""
    import onnx

    count = 0
    for tensor in _tensors(graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        where = {e.key: e.value for e in tensor.external_data}
        blob = data[where["location"]]
        offset = int(where.get("offset", 0))
        length = int(where.get("length", len(blob) - offset))
        tensor.raw_data = blob[offset : offset + length]
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
        count += 1
    return count


class KerasToOnnx(ExportHop):
    name = "tensorflow->onnx"
    source = framework = "tensorflow"
    targets = ("onnx",)

    @staticmethod
    def version() -> dict[str, str]:
        import keras

        return {"tensorflow": tf.__version__, "keras": keras.__version__, "tf2onnx": _tf2onnx().__version__}

    def export(self, model: Any, spec: Any, out: Path, options: ExportOptions) -> dict[str, Any]:
        if options.format != "onnx":
            raise ConversionError(f"--format {options.format}: TensorFlow exports ONNX only")
        tf2onnx = _tf2onnx()
        batch = None if options.dynamic_batch else options.batch_size
        images = [len(i.shape) == 3 and not i.dtype.startswith("int") for i in spec.inputs]
        # Token inputs: any sequence length (tf2onnx names the dimension; normalize_io
        # renames it "sequence"); a one-id input (DIN's candidate item) is no sequence
        # and keeps its length.  Images: NCHW, as the other frameworks' exports.
        signature = [
            tf.TensorSpec(
                (batch, None)
                if i.dtype.startswith("int") and len(i.shape) == 1 and i.shape[0] != 1
                else (batch, *i.shape),
                tf.as_dtype(i.dtype),
                name=name,
            )
            for i, name in zip(spec.inputs, input_names(spec))
        ]

        @tf.function(input_signature=signature)
        def nchw_model(*xs):
            args = [tf.transpose(x, (0, 2, 3, 1)) if image else x for x, image in zip(xs, images)]
            return {OUTPUT_NAME: model(args[0] if len(args) == 1 else args, training=False)}

        proto, storage, fixes, call = convert(tf2onnx, nchw_model, options.opset)
        inline_external_tensors(proto.graph, storage.name_to_tensor_data)
        import onnx

        onnx.save(proto, str(out))
        left = sum(1 for n in proto.graph.node if n.op_type == "Transpose")
        how = "NCHW input transposed to NHWC" if any(images) else "token inputs as they are"
        return {
            "exporter": f"tf2onnx {tf2onnx.__version__} {call} over a tf.function, {how}",
            "opset_requested": options.opset,
            "transposes_left": left,
            "rewrites": fixes,
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
        """A user's model in its own layout (nothing transposed), with its own input and
        output names; dimensions the signature leaves dynamic stay dynamic."""
        from dlbench.models.user.tensorflow import caller, flatten

        tf2onnx = _tf2onnx()
        names = [t.name for t in signature]
        specs = [
            tf.TensorSpec(
                [
                    None if not isinstance(d, int) or (i == 0 and options.dynamic_batch) else d
                    for i, d in enumerate(t.shape)
                ],
                tf.as_dtype(t.dtype),
                name=t.name,
            )
            for t in signature
        ]
        call = caller(model, source, names)

        @tf.function(input_signature=specs)
        def fn(*xs):
            return flatten(call(*xs), output_names)

        proto, storage, fixes, call = convert(tf2onnx, fn, options.opset)
        inline_external_tensors(proto.graph, storage.name_to_tensor_data)
        import onnx

        onnx.save(proto, str(out))
        return {
            "exporter": f"tf2onnx {tf2onnx.__version__} {call} over a tf.function, the model's own layout",
            "opset_requested": options.opset,
            "rewrites": fixes,
        }


HOP = KerasToOnnx()
