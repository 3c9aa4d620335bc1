"""Keras / TensorFlow models the user brings: ``.keras``, Keras HDF5, SavedModel, code.

Inputs are the model's own, in its own layout (a Keras model declared NHWC
takes NHWC: unlike the zoo's networks nothing is transposed), named and
ordered as the model declares them.  A SavedModel runs its
``serving_default`` signature, which takes and returns tensors by name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

from dlbench.core.errors import UserError, first_line
from dlbench.models.user import Source

SERVING = "serving_default"


def load(source: Source, obj: Any = None) -> Any:
    import keras
    import tensorflow as tf

    try:
        if source.kind in ("keras", "keras-h5"):
            return keras.saving.load_model(source.path, compile=False)
        if source.kind == "savedmodel":
            from dlbench.models.user import trust

            risks = savedmodel_risks(source.path)
            trust.require(source.label, risks, "its serving graph runs ops that act outside the run")
            loaded = tf.saved_model.load(source.path)
            if SERVING not in loaded.signatures:
                raise UserError(
                    f"{source.label}: the SavedModel has no {SERVING!r} signature "
                    f"(it has: {', '.join(loaded.signatures) or 'none'})"
                )
            return loaded
        if source.weights:
            obj.load_weights(source.weights)
        return obj
    except (ValueError, OSError, KeyError, TypeError) as exc:
        if source.kind == "keras-h5":
            # Keras 3 rebuilds an HDF5 model from its config, and layers Keras 2 wrote as
            # TensorFlow ops (TFOpLambda: MobileNetV3's hard-swish) cannot be rebuilt.
            raise UserError(
                f"{source.label}: Keras {_keras_version()} cannot rebuild this legacy HDF5 model "
                f"({first_line(exc)}); save it as a SavedModel instead (model.export('DIR') in "
                "Keras 3, or tf_keras for a Keras 2 model) and give DIR, or as .keras"
            ) from None
        raise UserError(f"{source.label}: Keras cannot load it ({first_line(exc)})") from None


# Ops whose effect outlives the run: files written or removed, checkpoints saved, summaries
# and debug dumps written, Python called.  Reads (vocabulary assets) are the model's own.
SIDE_EFFECT_OPS = frozenset(
    {
        "WriteFile",
        "Save",
        "SaveV2",
        "SaveSlices",
        "MergeV2Checkpoints",
        "CreateSummaryFileWriter",
        "CreateSummaryDbWriter",
        "WriteSummary",
        "WriteScalarSummary",
        "WriteHistogramSummary",
        "WriteImageSummary",
        "WriteAudioSummary",
        "WriteGraphSummary",
        "WriteRawProtoSummary",
        "ImportEvent",
        "DebugIdentityV2",
        "SaveDataset",
        "SaveDatasetV2",
        "PyFunc",
        "PyFuncStateless",
        "EagerPyFunc",
    }
)


def savedmodel_risks(path: str) -> list[str]:
    """Side-effect ops the SavedModel runs when loaded or served: everything reachable from
    its signatures (the init op among them) through called functions.  Every SavedModel also
    carries its own save function (SaveV2, MergeV2Checkpoints), which serving never calls:
    only what the signatures reach counts."""
    from tensorflow.core.protobuf import saved_model_pb2

    model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as fh:
        model.ParseFromString(fh.read())
    return sorted({op for meta in model.meta_graphs for op in _reached_ops(meta)} & SIDE_EFFECT_OPS)


def _reached_ops(meta: Any) -> set[str]:
    """The ops a MetaGraph's signatures reach, through the functions their nodes call."""
    graph = meta.graph_def
    functions = {f.signature.name: f for f in graph.library.function}
    nodes = {n.name: n for n in graph.node}
    ops: set[str] = set()
    called: list[str] = []

    def visit(node: Any) -> None:
        ops.add(node.op)
        if node.op in functions:
            called.append(node.op)
        for attr in node.attr.values():
            if attr.HasField("func"):
                called.append(attr.func.name)
            called.extend(f.name for f in attr.list.func)

    # Every signature's outputs, the init op's (__saved_model_init_op) among them.
    todo = [t.name.split(":")[0] for sig in meta.signature_def.values() for t in sig.outputs.values()]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        visit(nodes[name])
        todo += [i.split(":")[0].lstrip("^") for i in nodes[name].input]
    while called:
        name = called.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in functions[name].node_def:
            visit(node)
    return ops


def _keras_version() -> str:
    import keras

    return keras.__version__


def _dims(shape) -> list[Any] | None:
    return None if shape is None else [None if d is None else int(d) for d in shape]


def signature(model: Any, source: Source) -> dict[str, Any]:
    if source.kind == "savedmodel":
        fn = model.signatures[SERVING]
        specs = fn.structured_input_signature[1]
        inputs = [
            {"name": k, "dtype": s.dtype.name, "shape": _dims(s.shape.as_list())} for k, s in specs.items()
        ]
        return {"inputs": inputs, "outputs": list(fn.structured_outputs), "notes": []}
    declared = getattr(model, "inputs", None)
    if not declared:  # a subclassed model never called: no signature
        return {
            "inputs": [{"name": "input", "dtype": "float32", "shape": None}],
            "outputs": None,
            "notes": [f"{source.what} declares no inputs: shape from --shape input=..."],
        }
    inputs = [{"name": t.name, "dtype": str(t.dtype), "shape": _dims(t.shape)} for t in declared]
    return {"inputs": inputs, "outputs": output_names(model), "notes": []}


def output_names(model: Any) -> list[str] | None:
    names = getattr(model, "output_names", None)
    return [str(n) for n in names] if names else None


def caller(model: Any, source: Source, names: list[str]) -> Callable[..., Any]:
    """``fn(*tensors)`` in input order, returning the model's raw outputs."""
    if source.kind == "savedmodel":
        fn = model.signatures[SERVING]
        return lambda *xs: fn(**dict(zip(names, xs)))
    return lambda *xs: model(arranged(model, names, xs), training=False)


def arranged(model: Any, names: list[str], xs) -> Any:
    """What a Keras model is called with: its one tensor, a dict by name for a functional
    model (whatever its inputs' order), else a list in ``names`` order."""
    if len(names) == 1:
        return xs[0]
    declared = [t.name for t in getattr(model, "inputs", None) or []]
    return dict(zip(names, xs)) if declared == names else list(xs)


def flatten(out: Any, names: list[str] | None = None) -> dict[str, Any]:
    """Outputs by name: a dict's keys, the model's output names for a list, else ``output``."""
    if isinstance(out, dict):
        return {str(k): v for k, v in out.items()}
    if isinstance(out, (list, tuple)):
        keys = names if names and len(names) == len(out) else [f"output_{i}" for i in range(len(out))]
        return dict(zip(keys, out))
    return {names[0] if names and len(names) == 1 else "output": out}


def to_numpy(out: Any, names: list[str] | None = None) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in flatten(out, names).items()}


def run(model: Any, source: Source, names: list[str], arrays: list[np.ndarray]) -> dict:
    """One inference pass on host arrays (inputs in ``names`` order): outputs by name."""
    return to_numpy(caller(model, source, names)(*arrays), output_names(model))


def trainable(model: Any, source: Source, names: list[str], output: str) -> Any:
    """A Keras model whose call returns only the output training minimizes; it tracks the
    user's model, so its trainable variables are the user's."""
    import keras

    outputs = output_names(model)

    class Picked(keras.Model):
        def __init__(self, net):
            super().__init__(name="dlbench_picked")
            self.net = net

        def call(self, inputs, training=False):
            xs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            return flatten(self.net(arranged(self.net, names, xs), training=training), outputs)[output]

    return Picked(model)


def save_trained(net: Any, source: Source, directory, name: str) -> str:
    """A model file stays one (``.keras``, bench it as a file); a code model's weights
    are its ``--weights`` (its classes live in the user's code, not in the file)."""
    if source.built:
        file = "model.weights.h5"
        net.net.save_weights(str(directory / file))
    else:
        file = f"{name}.keras"
        net.net.save(str(directory / file))
    return file
