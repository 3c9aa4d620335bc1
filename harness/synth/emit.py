"""Units into one ONNX network: lanes of repeated units, each instance with its own weights.

Instances run on one chain of activations (``sequence``: each followed, where one is
left, by an instance whose input its output fits, as a real network's layers follow each
other).  Every instance reads the previous one's output, so what is in cache is what a
real network would have there, and has weights of its own, so no instance finds
another's weights warm.  Where one instance's output does not fit the next one's input
the chain is bridged with the fewest nodes that keep real values flowing (each costs a
dispatch the applications did not pay): a slice where it is longer, a tile where it is
shorter, within its rank where they can, else through the flat per-sample tensor (zeros
would decay the values towards denormals, which run slower on a CPU and would be
measured).
Weights are scaled so the activations keep their magnitude through long chains, and an
op whose values could run away (Div, Exp) was replaced by one that cannot
(``units.unit_of``).  The graph's batch axis is symbolic: the network scales with the
batch it is fed, as its applications did.  Shape arithmetic ("tiny" units) runs on a
lane of its own, from the input's shape to a second output, so no reshape depends on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from dlbench.harness.synth.units import ACTIVATIONS, Unit

OPSET = 17
LANES_KEY = "dlbench.synth.lanes"  # the metadata entry holding [[unit, count], ...]
INPUT, OUTPUT, SHAPES = "input", "output", "shape_arithmetic"


class _Graph:
    def __init__(self, seed: int) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self.names = 0

    def name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}_{self.names}"

    def const(self, prefix: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weights(self, prefix: str, shape: tuple[int, ...], fan_in: int, gain: float = 1.0) -> str:
        """Uniform weights whose variance keeps an activation's magnitude (1/fan_in)."""
        bound = gain * math.sqrt(3.0 / max(1, fan_in))
        return self.const(prefix, self.rng.uniform(-bound, bound, shape).astype(np.float32))

    def ints(self, prefix: str, values: Iterable[int]) -> str:
        return self.const(prefix, np.asarray(list(values), dtype=np.int64))

    def op(self, op: str, inputs: list[str], prefix: str, **attrs: Any) -> str:
        from onnx import helper

        out = self.name(prefix + "_" + op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out


def _target(shape: tuple[int, ...], axis: int | None) -> list[int]:
    """A per-sample shape as a Reshape target: its batch axis holds -1 (batch x multiple)."""
    return [-1 if i == axis else d for i, d in enumerate(shape)]


Step = tuple[str, list[int], list[int]]  # an op, its target/repeats/slice ends, the slice's axes


def bridge_steps(have: tuple[int, ...], axis: int | None, want: Unit) -> list[Step]:
    """The fewest nodes that take a tensor of per-sample shape ``have`` (batch axis
    ``axis``) to ``want``'s input (none where it is that already), each a dispatch the
    applications did not pay (on OpenVINO with dynamic shapes, a shape inference each).
    Two ways: within the rank, the dimensions cropped by one Slice and grown by one Tile
    (a Slice after it where the growth overshoots); else through the flat per-sample
    tensor, each reshape, tile or slice only where the sizes ask for it.  A tile within
    the rank grows one axis with only the batch before it, a copy of whole blocks: any
    other copies runs as short as its inner dimensions, which ONNX Runtime moved 3.6 to
    15 times slower than the flat tile's whole samples (at batch 8, [20, 1] to [20, 16] and
    [128, 1] to [128, 256]), data movement the applications did not have."""
    ranked: list[Step] | None = None
    same_batch = axis == want.axis == 0 and len(have) == len(want.x) and have[0] == want.x[0]
    grow = [i for i, (h, w) in enumerate(zip(have, want.x)) if w > h]
    if same_batch and (not grow or (len(grow) == 1 and all(d == 1 for d in have[: grow[0]]))):
        ranked = []
        crop = [i for i, (h, w) in enumerate(zip(have, want.x)) if w < h]
        if crop:
            ranked.append(("Slice", [want.x[i] for i in crop], crop))
        if grow:
            ranked.append(("Tile", [-(-w // h) for h, w in zip(have, want.x)], []))
            if want.x[grow[0]] % have[grow[0]]:
                ranked.append(("Slice", [want.x[grow[0]]], grow))
    got, need = math.prod(have), math.prod(want.x)
    middle: list[Step] = []
    if got < need:
        middle.append(("Tile", [1, -(-need // got)], []))
    if (got * -(-need // got) if got < need else got) != need:
        middle.append(("Slice", [need], [1]))
    flat: list[Step] = [("Reshape", [-1, got], [])] if middle and (have, axis) != ((1, got), 0) else []
    flat += middle
    if (((1, need), 0) if middle else (have, axis)) != (want.x, want.axis):
        flat.append(("Reshape", _target(want.x, want.axis), []))
    return ranked if ranked is not None and len(ranked) <= len(flat) else flat


def _bridge(g: _Graph, cur: str, steps: list[Step], prefix: str) -> str:
    """``cur`` taken to the unit's input by ``steps`` (``bridge_steps``'s)."""
    for op, values, axes in steps:
        if op == "Slice":
            bounds = [g.ints("lo", [0] * len(axes)), g.ints("hi", values), g.ints("ax", axes)]
            cur = g.op(op, [cur, *bounds], prefix)
        else:
            cur = g.op(op, [cur, g.ints("shape" if op == "Reshape" else "reps", values)], prefix)
    return cur


def _held(g: _Graph, cur: str, rank: int, prefix: str) -> str:
    """``cur`` through a Tile that copies it once: ONNX Runtime moves no QuantizeLinear or
    DequantizeLinear across a Tile, so a MaxPool between two of these stays in float in
    an INT8 build (see ``sequence``: a MaxPool an INT8 build runs on uint8 runs
    channels-first, 27x its float time, unless a QLinearConv feeds it as it is)."""
    return g.op("Tile", [cur, g.ints("reps", [1] * rank)], prefix)


def _apply(g: _Graph, u: Unit, x: str, p: str) -> str:
    """One instance of ``u`` on ``x`` (already of the unit's input shape)."""
    a = u.attrs
    if u.op == "Conv":
        cin, cout, group = u.x[1], u.y[1], a.get("group", 1)
        fan_in = cin // group * math.prod(a["kernel_shape"])
        gain = math.sqrt(2.0) if a.get("activation") == "Relu" else 1.0
        w = g.weights("w", (cout, cin // group, *a["kernel_shape"]), fan_in, gain)
        kept = {k: v for k, v in a.items() if k != "activation"}
        y = g.op("Conv", [x, w, g.const("b", np.zeros(cout, np.float32))], p, **kept)
        return g.op(a["activation"], [y], p) if a.get("activation") else y
    if u.op == "MatMul":
        return g.op("MatMul", [x, g.weights("w", (u.x[-1], u.y[-1]), u.x[-1])], p)
    if u.op in ("LSTM", "GRU"):
        h, dirs, gates = a["hidden_size"], u.dirs, 4 if u.op == "LSTM" else 3
        w = g.weights("w", (dirs, gates * h, u.x[-1]), u.x[-1] + h)
        r = g.weights("r", (dirs, gates * h, h), u.x[-1] + h)
        # A GRU resets after its recurrent product, as PyTorch and Keras (reset_after)
        # export theirs and their fused kernels compute it.
        reset = {"linear_before_reset": 1} if u.op == "GRU" else {}
        return g.op(u.op, [x, w, r], p, hidden_size=h, direction=a.get("direction", "forward"), **reset)
    if u.op == "BatchNormalization":
        c = u.x[1]
        ones, zeros = np.ones(c, np.float32), np.zeros(c, np.float32)
        stats = [g.const("gamma", ones), g.const("beta", zeros), g.const("mean", zeros), g.const("var", ones)]
        return g.op("BatchNormalization", [x, *stats], p)
    if u.op == "SkipLayerNormalization":  # the pattern ONNX Runtime fuses into its own op
        x = g.op("Add", [x, x], p)  # a residual of the input's full shape, as a block's is
        u = Unit("LayerNormalization", u.cls, u.x, u.y, u.axis, u.yaxis)
    if u.op == "LayerNormalization":
        d = u.x[-1]
        norm = [g.const("gamma", np.ones(d, np.float32)), g.const("beta", np.zeros(d, np.float32))]
        return g.op("LayerNormalization", [x, *norm], p, axis=-1)
    if u.op == "Softmax":
        return g.op("Softmax", [x], p, axis=-1)
    if u.op == "Gelu":  # the decomposition ONNX Runtime fuses back into its Gelu
        half = g.op("Mul", [x, g.const("c", np.array(0.5, np.float32))], p)
        scaled = g.op("Mul", [x, g.const("c", np.array(1 / math.sqrt(2), np.float32))], p)
        erf = g.op("Add", [g.op("Erf", [scaled], p), g.const("c", np.array(1.0, np.float32))], p)
        return g.op("Mul", [half, erf], p)
    if u.op in ("MaxPool", "AveragePool"):
        return g.op(u.op, [x], p, **a)
    if u.op == "ReduceMean":  # kept dimensions: the batch axis stays where it was
        return g.op(u.op, [x], p, axes=a.get("axes", [-1]), keepdims=1)
    if u.op == "GlobalAveragePool":
        return g.op(u.op, [x], p)
    if u.op in ("Add", "Mul"):
        shape = tuple(1 if i == u.axis else d for i, d in enumerate(u.x))
        if u.op == "Add":
            other = g.rng.uniform(-0.1, 0.1, shape)
        else:  # signs: the values keep their magnitude however long the chain
            other = g.rng.choice([-1.0, 1.0], shape)
        return g.op(u.op, [x, g.const("c", other.astype(np.float32))], p)
    if u.op == "Transpose" and len(u.x) >= 2:
        perm = [*range(len(u.x) - 2), len(u.x) - 1, len(u.x) - 2]
        return g.op("Transpose", [x], p, perm=perm)
    if u.op in ("Transpose", "Reshape"):  # a reshape moves nothing: it costs its dispatch
        return g.op("Reshape", [x, g.ints("shape", [-1])], p)
    if u.op in ACTIVATIONS:
        return g.op(u.op, [x], p, **ACTIVATION_ATTRS.get(u.op, {}))
    raise ValueError(f"no emitter for {u.op}")


ACTIVATION_ATTRS: dict[str, dict[str, Any]] = {"LeakyRelu": {"alpha": 0.01}, "Elu": {"alpha": 1.0}}


def emitted_shape(u: Unit) -> tuple[int, ...]:
    """The per-sample output shape ``u`` has as emitted (ONNX's shape inference at batch
    1), which the next instance's bridge needs; it can differ from the profiled one
    (padding the trace does not record)."""
    from onnx import TensorProto, helper, shape_inference

    if not u.batched:
        return u.y
    g = _Graph(0)
    y = _apply(g, u, INPUT, "u")
    x_info = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, list(u.x))
    graph = helper.make_graph(
        g.nodes, "unit", [x_info], [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)]
    )
    graph.initializer.extend(g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    out = inferred.graph.output[0].type.tensor_type.shape.dim
    return tuple(d.dim_value for d in out)


def spec(lanes: list[tuple[Unit, int]]) -> dict[str, str]:
    """The network's metadata that says what it is made of: the framework versions
    build from it, whatever their layout."""
    import json

    return {LANES_KEY: json.dumps([[u.to_json(), int(n)] for u, n in lanes])}


def sequence(left: dict[int, tuple[Unit, int]], shapes: dict[int, tuple[int, ...]]) -> list[int]:
    """The order the instances run in: after each, an instance whose input is its output
    (a 1x1 expansion after its projection, a convolution after the pooling that feeds it),
    else the one its output reaches with the fewest bridge nodes (``bridge_steps``), the
    one with most instances left among equals.  Repeats of a unit whose output is its
    input run as one lane.

    A MaxPool runs right after a convolution, as in every application that has one
    (else after a MaxPool that did, once no convolution is left): in an INT8 build ONNX
    Runtime runs it on uint8, in the channels-last layout of the QLinearConv before it
    (NhwcMaxPool), but after any other unit in the channels-first one, 27x its float
    time (a zoo network's 24 MaxPools after a Reshape made its INT8 build 2.3x slower
    than fitted).  Where the convolution's output is not the MaxPool's input as it is (a
    bridge between them breaks the layout), ``network`` keeps the MaxPools in float
    between two Tiles (``_held``), as fast as the applications' NhwcMaxPool."""
    remaining = {j: n for j, (_, n) in left.items()}
    order: list[int] = []
    have: tuple[tuple[int, ...], int | None] | None = None
    op = {j: u.op for j, (u, _) in left.items()}

    def cost(j: int) -> int:
        return 0 if have is None else len(bridge_steps(*have, left[j][0]))

    def pooled(last: str | None) -> bool:
        """Whether a MaxPool goes next, after ``last``."""
        others = [k for k in remaining if op[k] != "MaxPool"]
        return last == "Conv" or not others or (last == "MaxPool" and all(op[k] != "Conv" for k in others))

    while remaining:
        pool = pooled(op[order[-1]] if order else None)
        among = [k for k in remaining if (op[k] == "MaxPool") == pool] or list(remaining)
        j = min(among, key=lambda k: (cost(k), -remaining[k], k))
        order.append(j)
        remaining[j] -= 1
        if not remaining[j]:
            del remaining[j]
        have = (shapes[j], left[j][0].yaxis)
    return order


def network(lanes: list[tuple[Unit, int]], seed: int = 0, name: str = "synthetic") -> Any:
    """The ONNX model: input [batch, F] (F: the first batched unit's per-sample size), each
    lane's unit ``count`` times in turn, one output [batch, 1] (the mean of the chain's
    squares: the values returned cost nothing to copy, and, positive, they never cancel
    to ~0 the way a plain mean after a layer norm does, where a build's verification
    then compared rounding), and the tiny lane's int64 output."""
    from onnx import TensorProto, checker, helper

    g = _Graph(seed)
    # Instances are named by their unit's index in ``lanes`` (u3_i0_...): the profile of
    # the network is read back per unit by these names.
    batched = [(j, u, n) for j, (u, n) in enumerate(lanes) if u.batched and n > 0]
    tiny = [(j, u, n) for j, (u, n) in enumerate(lanes) if not u.batched and n > 0]
    if not batched:
        raise ValueError("a synthetic network needs at least one unit whose work grows with the batch")
    shapes = {j: emitted_shape(u) for j, u, _ in batched}
    order = sequence({j: (u, n) for j, u, n in batched}, shapes)
    first = lanes[order[0]][0]
    have: tuple[int, ...] = (1, math.prod(first.x))  # the input, [batch, F]
    axis: int | None = 0
    cur = INPUT
    done: dict[int, int] = {}
    prev, floating = None, False
    for j in order:
        u = lanes[j][0]
        prefix = f"u{j}_i{done.get(j, 0)}"
        done[j] = done.get(j, 0) + 1
        steps = bridge_steps(have, axis, u)
        tiled = any(op == "Tile" for op, _, _ in steps)
        if floating and u.op != "MaxPool" and not tiled:
            cur = _held(g, cur, len(have), prefix)
        opens = u.op == "MaxPool" and prev != "MaxPool"
        floating = (floating and u.op == "MaxPool") or (opens and not (prev == "Conv" and not steps))
        x = _bridge(g, cur, steps, prefix)
        if opens and floating and not tiled:
            x = _held(g, x, len(u.x), prefix)
        cur, have, axis, prev = _apply(g, u, x, prefix), shapes[j], u.yaxis, u.op
    flat = g.op("Reshape", [cur, g.ints("flat", [-1, math.prod(have)])], "end")
    # Squared by Pow, not Mul: ONNX Runtime's static quantizer leaves Pow and ReduceMean in
    # float, and a quantized Mul here had its QuantizeLinear moved back by the runtime
    # into the last unit: a zoo network's final MaxPool ran on uint8 in NCHW, 27x its
    # float time (no application's does: theirs run as NhwcMaxPool), and its INT8 build
    # took 1.51x its fp32 time instead of 1.12x.
    two = g.const("two", np.asarray(2.0, dtype=np.float32))
    result = g.op("ReduceMean", [g.op("Pow", [flat, two], "end")], "end", axes=[-1], keepdims=1)
    g.nodes.append(helper.make_node("Identity", [result], [OUTPUT], name="end_output"))
    outputs = [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", 1])]
    if tiny:
        s = g.op("Shape", [INPUT], "tiny")
        for index, u, count in tiny:
            for i in range(count):
                prefix = f"u{index}_i{i}"
                if u.op == "Gather":
                    s = g.op("Gather", [s, g.ints("idx", [0, 1])], prefix, axis=0)
                else:
                    s = g.op("Add", [s, g.ints("one", [1, 1])], prefix)
        g.nodes.append(helper.make_node("Identity", [s], [SHAPES], name="end_shapes"))
        outputs.append(helper.make_tensor_value_info(SHAPES, TensorProto.INT64, [2]))
    inputs = [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["batch", math.prod(first.x)])]
    graph = helper.make_graph(g.nodes, name, inputs, outputs)
    graph.initializer.extend(g.inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="dlbench synth"
    )
    model.ir_version = 8
    helper.set_model_props(model, spec(lanes))
    checker.check_model(model)
    return balanced(model)


# Ops whose output scales with their input (f(cx) = c f(x), c > 0), or whose output does not
# depend on its scale at all: across them a weight's correction is known without running
# the network again.  Every other op (a softmax, a recurrent cell, an erf, an added
# constant) answers a rescaled input in its own way.
HOMOGENEOUS = {
    "Conv", "MatMul", "Relu", "LeakyRelu", "MaxPool", "AveragePool", "GlobalAveragePool", "Reshape",
    "Tile", "Slice", "Transpose", "Identity", "Flatten", "ReduceMean", "Mul", "BatchNormalization",
}  # fmt: skip
SCALE_FREE = {"LayerNormalization"}
BALANCE_TOLERANCE = 1.25  # a rescale an op outside HOMOGENEOUS may see before it is measured again
BALANCE_RUNS = 200


def balanced(model: Any) -> Any:
    """``model`` with each convolution's and projection's weights rescaled so its output's
    RMS is about 1 on a standard-normal input, the way data-dependent initialization
    (LSUV) does.  Fan-in scaling alone keeps a few layers in range, not a chain of
    thousands: ReLUs that halve, strided pools that take maxima, residual doublings and
    softmaxes compound, and a zoo-sized network drifted from 1e-5 to 1e5, which an FP16
    build turns into Inf (and an INT8 calibration into coarse ranges).  Values only: the
    ops, shapes and cost are those emitted.

    One run of the network measures every weighted op's output.  Going down the chain, an
    op's correction is exact while only ``HOMOGENEOUS`` ops separate it from the ops
    already corrected (their corrections carry through them); past any other op that saw
    its input rescaled by more than ``BALANCE_TOLERANCE`` the measurement is stale, and
    the network is run again from there."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    order = list(model.graph.node)
    weighted = [i for i, n in enumerate(order) if n.op_type in ("Conv", "MatMul") and n.input[1] in inits]
    if not weighted:
        return model
    width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.random.default_rng(0).standard_normal((1, width)).astype(np.float32)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    # One session for every run: the weights being rescaled are fed to it as inputs.
    names = [order[i].input[1] for i in weighted]
    weights = {name: numpy_helper.to_array(inits[name]) for name in names}
    probe = type(model)()
    probe.CopyFrom(model)
    kept = [i for i in probe.graph.initializer if i.name not in weights]
    del probe.graph.initializer[:]
    probe.graph.initializer.extend(kept)
    probe.graph.input.extend(
        helper.make_tensor_value_info(name, TensorProto.FLOAT, list(w.shape)) for name, w in weights.items()
    )
    del probe.graph.output[:]
    probe.graph.output.extend(
        helper.make_tensor_value_info(order[i].output[0], TensorProto.FLOAT, None) for i in weighted
    )
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])

    constants = set(inits)

    def stale(t: int, c: float) -> bool:
        n = order[t]
        homogeneous = n.op_type in HOMOGENEOUS or (n.op_type == "Add" and not constants.intersection(n.input))
        return not homogeneous and abs(math.log(c)) > math.log(BALANCE_TOLERANCE)

    start = runs = 0
    while start < len(weighted) and runs < BALANCE_RUNS:
        outs = session.run(None, {INPUT: x, **weights})
        rms = [float(np.sqrt(np.mean(np.square(v, dtype=np.float64)))) for v in outs]
        runs += 1
        c, prev = 1.0, weighted[start - 1] if start else -1
        for k in range(start, len(weighted)):
            i = weighted[k]
            for t in range(prev + 1, i):
                if order[t].op_type in SCALE_FREE:
                    c = 1.0
                elif stale(t, c):
                    break
            else:
                r = rms[k]
                if r > 0 and math.isfinite(r):
                    weights[names[k]] = weights[names[k]] / np.float32(r * c)
                    c = 1.0 / r
                prev, start = i, k + 1
                continue
            break
    for name, w in weights.items():
        inits[name].CopyFrom(numpy_helper.from_array(w, name))
    return model
