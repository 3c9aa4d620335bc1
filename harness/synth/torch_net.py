"""The synthetic network in PyTorch: the same nodes, the same weights, as TorchScript.

The network is generated as ONNX; its PyTorch version is that graph executed op by op
with torch's own kernels (``Graph.forward`` walks the nodes in order), so it is the same
network by construction and cannot drift from the ONNX one: the conversion checks its
outputs against ONNX Runtime's before it writes anything.  Traced to TorchScript, a
format ``bench`` reads for the PyTorch backend, with the batch left free (every reshape
target keeps the -1 the generator wrote).  Only the ops the generator emits are here;
anything else is refused by name.

Run as ``python -m dlbench.harness.synth.torch_net [--scoped] NETWORK.onnx OUT.pt [...]``: a
process of its own, so the parent never imports torch.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

ACTIVATIONS = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "HardSigmoid": None,
    "HardSwish": None, "LeakyRelu": None, "Elu": None, "Softplus": None,
}  # fmt: skip


def _attrs(node) -> dict[str, Any]:
    from onnx import helper

    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


def build(model, scoped: bool = False) -> Any:
    """A torch.nn.Module that runs ``model``'s nodes with torch ops; ``scoped``: each node in
    a profiler range of its name, as a profile names a module's ops (tracing keeps the
    ranges), so that a profile's time is told to the generator's units by name."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from onnx import numpy_helper

    from dlbench.harness.profile.torch_cell import SCOPE

    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    # Integer constants (reshape targets, slice bounds, tile counts, gather indices) are
    # Python values, so the trace keeps them as the constants they are.
    ints = {k: a.tolist() for k, a in arrays.items() if a.dtype.kind == "i"}
    inits = {k: a for k, a in arrays.items() if k not in ints}
    nodes = [(n.op_type, list(n.input), list(n.output), _attrs(n)) for n in model.graph.node]
    names = [n.name for n in model.graph.node]
    for i, (op, ins, outs, a) in enumerate(nodes):
        if op in ("LSTM", "GRU"):
            ins[1:] = _torch_weights(op, ins, inits, a)
        elif op == "Conv" and (affine := _per_channel(ins, inits, a)):
            nodes[i] = ("BatchNormalization", affine, outs, {"epsilon": 0.0})
    # ONNX's own W and R, regrouped above, are read by no node: not kept as buffers too.
    read = {i for _, ins, _, _ in nodes for i in ins}
    inits = {k: v for k, v in inits.items() if k in read}

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.names = {name: f"w{i}" for i, name in enumerate(inits)}
            for name, array in inits.items():
                self.register_buffer(self.names[name], torch.from_numpy(np.array(array)))
            self.nodes = nodes
            self.outputs = [o.name for o in model.graph.output]

        def value(self, env: dict[str, Any], name: str) -> Any:
            if name in env:
                return env[name]
            return ints[name] if name in ints else getattr(self, self.names[name])

        def forward(self, x):
            env: dict[str, Any] = {model.graph.input[0].name: x}
            for name, (op, ins, outs, a) in zip(names, self.nodes):
                with torch.profiler.record_function(SCOPE + name) if scoped else contextlib.nullcontext():
                    env[outs[0]] = self.run_node(op, [self.value(env, i) for i in ins if i], a)
            return tuple(env[o] for o in self.outputs)

        def run_node(self, op: str, v: list[Any], a: dict[str, Any]) -> Any:
            if op == "Conv":
                pads = a.get("pads", [0] * (2 * (v[0].dim() - 2)))
                half = len(pads) // 2
                if pads[:half] != pads[half:]:
                    raise ValueError("asymmetric padding is not emitted")
                conv = F.conv2d if v[0].dim() == 4 else F.conv1d
                y = conv(v[0], v[1], v[2] if len(v) > 2 else None, a.get("strides", 1), pads[:half],
                         a.get("dilations", 1), a.get("group", 1))  # fmt: skip
            elif op == "MatMul":
                y = torch.matmul(v[0], v[1])
            elif op == "LayerNormalization":
                y = F.layer_norm(v[0], v[0].shape[-1:], v[1], v[2], a.get("epsilon", 1e-5))
            elif op == "BatchNormalization":
                y = F.batch_norm(v[0], v[3], v[4], v[1], v[2], False, 0.0, a.get("epsilon", 1e-5))
            elif op == "Softmax":
                y = torch.softmax(v[0], a.get("axis", -1))
            elif op in ("Add", "Mul"):
                # The shape lane adds an integer constant, held as a Python list.
                other = torch.as_tensor(v[1]) if isinstance(v[1], list) else v[1]
                y = v[0] + other if op == "Add" else v[0] * other
            elif op == "Pow":
                y = torch.pow(v[0], v[1])
            elif op == "Sum":
                y = v[0]
                for t in v[1:]:
                    y = y + t
            elif op == "Reshape":
                y = torch.reshape(v[0], v[1])
            elif op == "Slice":
                y = v[0]
                for axis, lo, hi in zip(v[3], v[1], v[2]):
                    y = y.narrow(axis, lo, hi - lo)
            elif op == "Tile":
                y = _tile(v[0], v[1])
            elif op == "Transpose":
                y = v[0].permute(a["perm"])
            elif op == "MaxPool" or op == "AveragePool":
                pool = F.max_pool2d if op == "MaxPool" else F.avg_pool2d
                pads = a.get("pads", [0, 0, 0, 0])
                y = pool(v[0], a["kernel_shape"], a.get("strides", a["kernel_shape"]), pads[:2],
                         ceil_mode=bool(a.get("ceil_mode", 0)))  # fmt: skip
            elif op == "GlobalAveragePool":
                # A pooling op, as an application's nn.AdaptiveAvgPool2d(1) calls (a mean is
                # another class to the profile that prices the units).
                adaptive = getattr(F, f"adaptive_avg_pool{v[0].dim() - 2}d", None)
                y = adaptive(v[0], 1) if adaptive else v[0].mean(dim=list(range(2, v[0].dim())), keepdim=True)
            elif op == "ReduceMean":
                y = v[0].mean(dim=a.get("axes", [-1]), keepdim=bool(a.get("keepdims", 1)))
            elif op == "Shape":
                y = torch._shape_as_tensor(v[0])  # traced as the shape, not a constant
            elif op == "Gather":
                y = v[0][v[1]]
            elif op == "Identity":
                y = v[0]
            elif op in ("LSTM", "GRU"):
                y = _recurrent(op, v, a)
            elif op in ACTIVATIONS:
                name = ACTIVATIONS[op]
                y = getattr(torch, name)(v[0]) if name else _activation(op, v[0], a)
            else:
                raise ValueError(f"{op}: not an op the synthetic network emits")
            return y

    return Graph().eval()


# Above this many copies one expand-and-copy beats a concatenation of the copies.
_CONCATENATED = 8


def _tile(x, reps: list[int]):
    """ONNX's Tile as the one copy it is in ONNX Runtime.  ``Tensor.repeat`` dispatches
    some 30 ops (32 profiler events): 16 to 20 us for a [1, 96] bridge on one thread,
    against 4 to 9 us as a concatenation of its copies and 9 to 13 us as an expanded
    view copied once; on one zoo network's 40 bridges, 0.3 ms of its 11.4 at batch 1,
    dispatches no application pays.  Few copies are concatenated, many are one view
    copied (a concatenation of 512 ran 4x slower); the batch axis stays free."""
    import torch

    for axis, times in enumerate(reps):
        if times == 1:
            continue
        if times <= _CONCATENATED:
            x = torch.cat([x] * times, axis)
        else:
            grown = [-1] * x.dim()
            grown.insert(axis, times)
            x = x.unsqueeze(axis).expand(grown).flatten(axis, axis + 1)
    return x


def _activation(op: str, x, a: dict[str, Any]):
    import torch.nn.functional as F

    if op == "HardSigmoid":
        return (
            F.hardsigmoid(x) if a.get("alpha", 0.2) == 1 / 6 else (x * a.get("alpha", 0.2) + 0.5).clamp(0, 1)
        )
    if op == "HardSwish":
        return F.hardswish(x)
    if op == "LeakyRelu":
        return F.leaky_relu(x, a.get("alpha", 0.01))
    if op == "Elu":
        return F.elu(x, a.get("alpha", 1.0))
    return F.softplus(x)


# ONNX's gate order within W and R, as torch's fused kernels want them: LSTM i, o, f, c
# to torch's i, f, g, o; GRU z, r, h to torch's r, z, n.
GATES = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2]}


def _per_channel(ins: list[str], inits: dict[str, Any], a: dict[str, Any]) -> list[str] | None:
    """A depthwise 1x1 convolution's inputs as a batch norm's (x, scale, bias, mean 0,
    variance 1; added to ``inits``), or None for any other convolution.  It is how ONNX
    Runtime's NCHWc pass runs a BatchNormalization (densenet121-mini's between its
    convolutions), so applications' batch norms become such units.  PyTorch runs a
    grouped 1x1 convolution on one thread through its reference kernel, group by group
    (a [1, 64, 4, 4] one: 1,219 ops, 1.1 ms under the profiler), where the applications'
    own batch norms are one fused op of a few µs.  With variance 1 and epsilon 0 it
    computes the same values."""
    weight = inits.get(ins[1]) if len(ins) > 1 else None
    if weight is None or weight.ndim < 3 or any(k != 1 for k in weight.shape[1:]):
        return None
    channels = weight.shape[0]
    strides, pads = a.get("strides", [1]), a.get("pads", [0])
    if a.get("group", 1) != channels or any(s != 1 for s in strides) or any(pads):
        return None
    names = [f"{ins[1]}.{part}" for part in ("scale", "bias", "mean", "var")]
    bias = inits[ins[2]] if len(ins) > 2 and ins[2] else np.zeros(channels, weight.dtype)
    for name, value in zip(names, (weight.reshape(channels), bias, np.zeros_like(bias), np.ones_like(bias))):
        inits[name] = np.ascontiguousarray(value)
    return [ins[0], *names]


def _torch_weights(op: str, ins: list[str], inits: dict[str, Any], a: dict[str, Any]) -> list[str]:
    """The node's W and R as torch's flat parameter list (w_ih, w_hh per direction), its
    gates reordered, added to ``inits`` once: so the trace records one fused
    ``aten::lstm``/``aten::gru`` per node, as an application's ``nn.LSTM`` runs, with no
    slicing of the weights in every forward."""
    if len(ins) > 3 and any(ins[3:]):
        raise ValueError(f"{op} with a bias or initial state: not what the synthetic network emits")
    if op == "GRU" and not a.get("linear_before_reset", 0):
        raise ValueError("GRU without linear_before_reset: torch's kernel resets after the product")
    names = []
    for d in range(inits[ins[1]].shape[0]):
        for which in ins[1:3]:
            gates = np.split(inits[which][d], len(GATES[op]))
            names.append(f"{which}:{d}")
            inits[names[-1]] = np.ascontiguousarray(np.concatenate([gates[i] for i in GATES[op]]))
    return names


def _recurrent(op: str, v: list[Any], a: dict[str, Any]):
    """ONNX's LSTM/GRU (no bias; a GRU's reset after the product) as torch's fused kernel,
    the one ``nn.LSTM``/``nn.GRU`` call; its output in ONNX's [seq, dirs, batch, hidden]."""
    import torch

    h, dirs = a["hidden_size"], 2 if a.get("direction") == "bidirectional" else 1
    x = v[0]
    state = x.new_zeros(dirs, x.shape[1], h)
    if op == "LSTM":  # [seq, batch, dirs x hidden]
        y = torch.lstm(x, (state, state), v[1:], False, 1, 0.0, False, dirs == 2, False)[0]
    else:
        y = torch.gru(x, state, v[1:], False, 1, 0.0, False, dirs == 2, False)[0]
    return y.reshape(x.shape[0], x.shape[1], dirs, h).transpose(1, 2)


def convert(
    onnx_path: str,
    out: str,
    batches: tuple[int, ...] = (1, 3),
    tolerance: float = 1e-3,
    scoped: bool = False,
) -> dict[str, Any]:
    """Trace the PyTorch version to TorchScript at ``out`` after checking it against ONNX
    Runtime at each batch size; the largest relative difference seen.  ``scoped``: the
    version a profile reads (``build``'s ranges), not the one bench times."""
    import onnx
    import onnxruntime as ort
    import torch

    model = onnx.load(onnx_path)
    width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    # Compared on the activations the network ends in, not only on their mean (its output):
    # a mean can cancel to near zero (a layer norm's output does), where a relative
    # difference measures nothing but rounding.
    checked = _exposing_last_activations(model)
    net = build(checked, scoped)
    session = ort.InferenceSession(checked.SerializeToString(), providers=["CPUExecutionProvider"])
    worst = 0.0
    rng = np.random.default_rng(0)
    for batch in batches:
        x = rng.standard_normal((batch, width)).astype(np.float32)
        want = session.run(None, {model.graph.input[0].name: x})
        with torch.no_grad():
            got = net(torch.from_numpy(x))
        # Relative to the activations' scale: the mean itself may have cancelled to ~0.
        scale = max(float(np.abs(w).max()) for w in want if w.dtype.kind == "f") or 1.0
        for w, g in zip(want, got):
            diff = np.abs(g.numpy().astype(w.dtype) - w).max()
            worst = max(worst, float(diff) / scale if w.dtype.kind == "f" else (math.inf if diff else 0.0))
    if worst > tolerance:
        raise ValueError(
            f"the PyTorch version differs from ONNX Runtime's by {worst:.2g} (limit {tolerance})"
        )
    net.outputs = net.outputs[: len(model.graph.output)]  # the file keeps the network's own
    with torch.no_grad():
        traced = torch.jit.trace(net, torch.from_numpy(rng.standard_normal((2, width)).astype(np.float32)))
    traced.save(out)
    return {"path": out, "max_relative_difference": worst}


def _exposing_last_activations(model):
    """A copy of the network whose outputs also include the input of its final mean."""
    import onnx
    from onnx import helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    produced = {o: n for n in copy.graph.node for o in n.output}
    mean = produced.get(produced[copy.graph.output[0].name].input[0])
    if mean is not None and mean.op_type == "ReduceMean":
        copy.graph.output.append(helper.make_tensor_value_info(mean.input[0], onnx.TensorProto.FLOAT, None))
    return copy


if __name__ == "__main__":
    import functools

    from dlbench.harness.synth.frameworks import main

    scoped = sys.argv[1:2] == ["--scoped"]  # [--scoped] NETWORK.onnx OUT.pt ...
    sys.exit(main(functools.partial(convert, scoped=scoped), sys.argv[1 + scoped :]))
