"""MindSpore models the user brings: MindIR graphs, and ``nn.Cell`` networks built by code.

A MindIR file records its inputs (names, dtypes, shapes: read from its
protobuf with MindSpore's own ``mind_ir_pb2``), so it needs no sidecar; a
Cell's ``construct`` names its inputs but not their shapes, which come from
``--shape`` / ``--input``.  Outputs: ``output`` for one tensor,
``output_0``... for a tuple.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import numpy as np

from dlbench.core.errors import UserError, first_line
from dlbench.models.user import Source

os.environ.setdefault("GLOG_v", "3")


def load(source: Source, obj: Any = None) -> Any:
    import mindspore as ms
    from mindspore import nn

    try:
        if source.kind == "mindir":
            return nn.GraphCell(ms.load(source.path))
        if source.weights:
            ms.load_checkpoint(source.weights, net=obj, strict_load=True)
    except (RuntimeError, ValueError, OSError, TypeError) as exc:
        raise UserError(f"{source.label}: MindSpore cannot load it ({first_line(exc)})") from None
    obj.set_train(False)
    return obj


def signature(model: Any, source: Source) -> dict[str, Any]:
    if source.kind == "mindir":
        return _mindir_inputs(source)
    params = inspect.signature(model.construct).parameters.values()
    names = [
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return {
        "inputs": [{"name": n, "dtype": "float32", "shape": None} for n in names],
        "outputs": None,
        "notes": [
            f"{source.what} does not record its input shapes or dtypes: shapes from "
            f"--shape/--input, dtype float32 unless an --input file says otherwise"
        ],
    }


_DTYPES = {
    "FLOAT": "float32",
    "FLOAT16": "float16",
    "DOUBLE": "float64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "UINT8": "uint8",
    "BOOL": "bool",
    "BFLOAT16": "bfloat16",
}


def _mindir_inputs(source: Source) -> dict[str, Any]:
    from mindspore.train import mind_ir_pb2

    proto = mind_ir_pb2.ModelProto()
    with open(source.path, "rb") as fh:
        proto.ParseFromString(fh.read())
    inputs = []
    for value in proto.graph.input:
        if not value.tensor:
            raise UserError(f"{source.label}: input {value.name!r} is not a tensor")
        t = value.tensor[0]
        kind = mind_ir_pb2.TensorProto.DataType.Name(t.data_type)
        if kind not in _DTYPES:
            raise UserError(
                f"{source.label}: input {value.name!r} is {kind}; dlbench feeds {', '.join(sorted(_DTYPES))}"
            )
        inputs.append(
            {
                "name": value.name.rpartition(":")[2],
                "dtype": _DTYPES[kind],
                "shape": [None if d < 0 else int(d) for d in t.dims],
            }
        )
    return {"inputs": inputs, "outputs": None, "notes": []}


def to_numpy(out: Any) -> dict[str, np.ndarray]:
    if isinstance(out, (tuple, list)):
        return {f"output_{i}": o.asnumpy() for i, o in enumerate(out)}
    return {"output": out.asnumpy()}


def run(model: Any, source: Source, names: list[str], arrays: list[np.ndarray]) -> dict:
    """One inference pass on host arrays (inputs in ``names`` order): outputs by name."""
    import mindspore as ms

    return to_numpy(model(*(ms.Tensor(a) for a in arrays)))


def trainable(model: Any, source: Source, names: list[str], output: str) -> Any:
    """A Cell returning only the output training minimizes (``output_K`` of a tuple);
    ``auto_prefix=False`` keeps the user's parameter names in the checkpoint."""
    from mindspore import nn

    index = int(output.rpartition("_")[2]) if output.startswith("output_") else None

    class Picked(nn.Cell):
        def __init__(self, net):
            super().__init__(auto_prefix=False)
            self.net, self.index = net, index

        def construct(self, *x):
            return self.net(*x)

    class PickedOne(Picked):
        def construct(self, *x):
            return self.net(*x)[self.index]

    return (Picked if index is None else PickedOne)(model)


def save_trained(net: Any, source: Source, directory, name: str) -> str:
    """The network's weights, the ``--weights`` of its ``--model-from``."""
    import mindspore as ms

    ms.save_checkpoint(net.net, str(directory / "model.ckpt"))
    return "model.ckpt"
