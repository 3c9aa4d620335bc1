"""A ``tf.function`` frozen into one flat GraphDef that tf2onnx can convert whole.

``tf2onnx.convert.from_function`` freezes the function itself, and two classes of
Keras 3 models came out of it broken:

* **Constants held by preprocessing layers became graph inputs.**  keras.applications'
  EfficientNetV2 normalizes with fixed mean and variance tensors; the function captures
  them as eager tensors (not variables), and from_function passes every non-resource
  capture on as an input ("has 3 inputs, the verification inputs are 1").  Freezing
  with ``convert_variables_to_constants_v2`` turns every capture into a Const.
* **Nested functions that must be compiled by XLA stayed calls.**  Keras' TensorFlow
  backend runs grouped and depthwise convolutions (ConvNeXt's 7×7) through a
  ``tf.function(jit_compile=True)``; functions marked ``_XlaMustCompile``/``_noinline``
  are never inlined, so a ``StatefulPartitionedCall`` was left for ONNX.  The marks are
  an execution hint for TensorFlow's own runtime, not semantics: they are dropped, and
  grappler (run by tf2onnx) inlines the bodies.

Ops tf2onnx has no handler for but that are a line of algebra away are rewritten in the
TensorFlow graph before conversion (``REWRITES``: ``Erfc(x) = 1 - Erf(x)``, which Keras 3's
exact GELU uses).  Each fix applied is returned by name, for the export record.

Only a function that holds one of these goes through the frozen path; any other is
converted by ``from_function`` as before.  The frozen graph is not a drop-in for every
model: tf2onnx's transpose optimizer crashes on a bias-free Conv followed by a scalar Add
there (MobileNetV3's hard-swish, ``max() arg is an empty sequence``), which the plain
path never meets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

# Attributes that only tell TensorFlow's runtime how to execute a function.
EXECUTION_HINTS = ("_XlaMustCompile", "_noinline")


def _erfc(node: Any) -> list[Any]:
    from tensorflow.core.framework import node_def_pb2

    dtype = tf.dtypes.as_dtype(node.attr["T"].type)
    erf = node_def_pb2.NodeDef(name=node.name + "/erf", op="Erf", input=list(node.input))
    erf.attr["T"].CopyFrom(node.attr["T"])
    one = node_def_pb2.NodeDef(name=node.name + "/one", op="Const")
    one.attr["dtype"].type = dtype.as_datatype_enum
    one.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.array(1, dtype.as_numpy_dtype)))
    # The rewritten node keeps the name, so its consumers read the same tensor.
    sub = node_def_pb2.NodeDef(name=node.name, op="Sub", input=[one.name, erf.name])
    sub.attr["T"].CopyFrom(node.attr["T"])
    return [erf, one, sub]


# TensorFlow op -> its rewrite in ops tf2onnx converts.
REWRITES = {"Erfc": _erfc}


def _drop_execution_hints(graph_def: Any) -> int:
    count = 0
    holders = [f.attr for f in graph_def.library.function] + [n.attr for n in graph_def.node]
    for attrs in holders:
        for key in EXECUTION_HINTS:
            if key in attrs:
                del attrs[key]
                count += 1
    return count


def _rewrite(nodes: Any) -> dict[str, int]:
    done: dict[str, int] = {}
    out = []
    for node in nodes:
        if node.op in REWRITES:
            out += REWRITES[node.op](node)
            done[node.op] = done.get(node.op, 0) + 1
        else:
            out.append(node)
    if done:
        del nodes[:]
        nodes.extend(out)
    return done


def frozen(fn: Any) -> tuple[Any, list[str], list[str], dict[str, str], list[str]]:
    """(graph_def, input names, output names, tensors to rename, fixes applied) for a
    ``tf.function`` with an input signature, ready for ``tf2onnx.convert.from_graph_def``."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = fn.get_concrete_function()
    flat = convert_variables_to_constants_v2(concrete, lower_control_flow=False, aggressive_inlining=True)
    graph_def = flat.graph.as_graph_def()
    inputs = [t.name for t in flat.inputs]
    outputs = [t.name for t in flat.outputs]
    # The signature's names and the output dict's keys, as from_function gives them.
    signature = [t.name for t in tf.nest.flatten(concrete.structured_input_signature)]
    renames = dict(zip(inputs, signature))
    if isinstance(concrete.structured_outputs, dict):
        renames.update({v.name: k for k, v in concrete.structured_outputs.items()})
    fixes = []
    captured = len(concrete.captured_inputs)
    if captured:
        fixes.append(f"{captured} captured variables and tensors frozen to constants")
    if hints := _drop_execution_hints(graph_def):
        fixes.append(f"{hints} XLA-only function marks dropped so nested functions inline")
    for fdef in graph_def.library.function:
        for op, n in _rewrite(fdef.node_def).items():
            fixes.append(f"{n} {op} rewritten ({op} in a function)")
    for op, n in _rewrite(graph_def.node).items():
        fixes.append(f"{n} {op} rewritten")
    return graph_def, inputs, outputs, renames, fixes


def needs_freezing(fn: Any) -> list[str]:
    """What in ``fn`` tf2onnx's own freezing leaves unconvertible (empty: nothing)."""
    concrete = fn.get_concrete_function()
    why = []
    constants = [t for t in concrete.captured_inputs if t.dtype != tf.resource]
    if constants:
        why.append(f"{len(constants)} captured constant tensors")
    graph_def = concrete.graph.as_graph_def()
    functions = graph_def.library.function
    if any(key in f.attr for f in functions for key in EXECUTION_HINTS):
        why.append("functions marked for XLA")
    ops = {n.op for n in graph_def.node} | {n.op for f in functions for n in f.node_def}
    why += [f"{op} ops" for op in sorted(ops & set(REWRITES))]
    return why


def convert(tf2onnx: Any, fn: Any, opset: int) -> tuple[Any, Any, list[str], str]:
    """(ONNX proto, tf2onnx's external tensor storage, fixes applied, the tf2onnx call that
    converted it: the record names the path taken, not the one that might have been)."""
    if not needs_freezing(fn):
        proto, storage = tf2onnx.convert.from_function(
            fn, input_signature=fn.input_signature, opset=opset, large_model=True
        )
        return proto, storage, [], "convert.from_function"
    graph_def, inputs, outputs, renames, fixes = frozen(fn)
    proto, storage = tf2onnx.convert.from_graph_def(
        graph_def,
        name=getattr(fn, "__name__", None),
        input_names=inputs,
        output_names=outputs,
        opset=opset,
        large_model=True,
        tensors_to_rename=renames,
    )
    return proto, storage, fixes, "convert.from_graph_def (the function frozen)"
