"""Where an INT8 model loses its accuracy: fp32 against int8, layer by layer.

A failed INT8 verdict says the output is wrong, not which layer made it
wrong, and on a model nobody here has seen that is what the user needs to
choose ``--exclude-nodes`` / ``--exclude-op-types``.  So the fp32 graph the
quantizer saw (rebuilt by ``converters.onnx_normalize`` and
``converters.onnx_to_int8.prepare``, both deterministic, which keeps the
tensor names the INT8 model kept) and the INT8
model both run a few of the verification inputs with every intermediate
tensor made a graph output, and each node's output is compared:

* ``sqnr_db`` — the signal-to-quantization-noise ratio,
  20·log10(‖fp32‖ / ‖fp32 − int8‖), of the value the node's consumers see
  (after its own Q/DQ pair, if it has one): everything lost up to and
  including this layer.
* ``lost_db`` — the SQNR of the node's worst input minus that of its output:
  what this layer itself lost (its weights' and its output's quantization),
  the figure that says which node to leave in float.  Ranked by it, most first.  A Softmax pinned to
  steps of 1/255 loses everything its logits had.  ``quantized`` says
  whether the output went through a Q/DQ pair.

Both models run with ONNX Runtime's graph optimizations off, so the INT8 one
computes through its Q/DQ pairs in float (the arithmetic the fused integer
kernels reproduce to within rounding) and no tensor is fused away.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.atomic import scratch
from dlbench.harness.output.tables import markdown

TOP = 10
SAMPLES = 2  # every intermediate of a ResNet-50 is about 100 MB per sample
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """20·log10(‖reference‖ / ‖reference − candidate‖); capped at 200 dB when they agree."""
    ref = np.asarray(reference, dtype=np.float64).ravel()
    cand = np.asarray(candidate, dtype=np.float64).ravel()
    finite = np.isfinite(ref) & np.isfinite(cand)
    # Infinities are legitimate (a max pool's -inf padding, a log of 0) where both sides
    # agree on them; anything else non-finite is as far off as a value can be.
    if not np.array_equal(ref[~finite], cand[~finite]):
        return -200.0
    ref, cand = ref[finite], cand[finite]
    noise = np.linalg.norm(ref - cand)
    signal = np.linalg.norm(ref)
    if noise == 0.0:
        return 200.0
    if signal == 0.0:
        return -200.0
    return float(20.0 * math.log10(signal / noise))


def _sample(inputs: Sequence[Any], n: int) -> Any:
    """The first ``n`` samples of the verification batches, as one batch."""
    first = inputs[-1]
    if isinstance(first, (tuple, list)):
        return tuple(a[:n] for a in first)
    return first[:n]


def _with_outputs(model, names: dict[str, int]):
    """``model`` with every tensor in ``names`` (name -> element type) a graph output."""
    from onnx import helper

    have = {o.name for o in model.graph.output}
    for name, elem in names.items():
        if name not in have:
            model.graph.output.append(helper.make_tensor_value_info(name, elem, None))
    return model


def _run(model, feeds: dict[str, np.ndarray], threads: int) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def _float_tensors(model) -> dict[str, int]:
    """Float outputs of the nodes of ``model`` -> element type (from shape inference)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {
        v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.output]
    }
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)
    return {out: types[out] for n in model.graph.node for out in n.output if types.get(out) in floats}


def _after_qdq(model) -> dict[str, str]:
    """Tensor -> the output of the QuantizeLinear -> DequantizeLinear pair it feeds."""
    consumers: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    pairs = {}
    for n in model.graph.node:
        if n.op_type != "QuantizeLinear":
            continue
        dq = [c for c in consumers.get(n.output[0], []) if c.op_type == "DequantizeLinear"]
        if dq:
            pairs[n.input[0]] = dq[0].output[0]
    return pairs


def layer_errors(
    source: str | Path,
    artifact: str | Path,
    inputs: Sequence[Any],
    *,
    threads: int = 1,
    top: int = TOP,
    samples: int = SAMPLES,
) -> dict[str, Any]:
    """Per-node SQNR of ``artifact`` (INT8 ONNX) against the fp32 graph it was built from,
    on the first ``samples`` samples of the last verification batch; the ``top`` worst."""
    import onnx

    from dlbench.converters.onnx_normalize import normalize
    from dlbench.converters.onnx_to_int8 import QDQ_MIN_OPSET, prepare

    with scratch("dlbench-layers") as tmp:
        pre, normalized = Path(tmp, "pre.onnx"), Path(tmp, "normalized.onnx")
        # The graph the build quantized: the same deterministic normalization first.
        if normalize(source, normalized, min_opset=QDQ_MIN_OPSET) is None:
            normalized = Path(source)
        prepare(normalized, pre)
        fp32 = onnx.load(str(pre))
    quant = onnx.load(str(artifact))
    float_types = _float_tensors(fp32)
    post = _after_qdq(quant)
    x = _sample(inputs, samples)
    names = [i.name for i in fp32.graph.input if i.name not in {t.name for t in fp32.graph.initializer}]
    feeds = dict(zip(names, x if isinstance(x, tuple) else (x,)))
    # Which fp32 tensor each int8 tensor matches: its own name, or, for a graph output
    # the quantizer renamed (T -> T_QuantizeLinear_Input -> Q -> DQ -> T), the name after
    # its Q/DQ pair.  A quantized graph input counts as a layer of its own.
    matches = [(None, name, post[name], name) for name in names if name in post]
    for node in quant.graph.node:
        if node.op_type in QDQ_OPS:
            continue
        for out in node.output:
            seen = post.get(out, out)
            ref = out if out in float_types else seen if seen in float_types else None
            if ref is not None:
                matches.append((node, out, seen, ref))
    ref_values = _run(
        _with_outputs(fp32, {r: float_types[r] for *_, r in matches if r not in feeds}), feeds, threads
    )
    ref_values.update(feeds)
    int8_values = _run(
        _with_outputs(quant, {seen: float_types.get(ref, 1) for _, _, seen, ref in matches}), feeds, threads
    )
    score: dict[str, float] = {}
    for _, _, seen, ref in matches:
        a, b = ref_values.get(ref), int8_values.get(seen)
        if a is not None and b is not None and a.shape == b.shape:
            score[seen] = sqnr_db(a, b)
    rows = []
    for node, out, seen, ref in matches:
        if seen not in score:
            continue
        before = [score[i] for i in (node.input if node is not None else ()) if i in score]
        rows.append(
            {
                "node": node.name if node is not None else ref,
                "op": node.op_type if node is not None else "graph input",
                "tensor": ref,
                "sqnr_db": round(score[seen], 2),
                "lost_db": round(min(before) - score[seen], 2) if before else None,
                "quantized": out in post,
            }
        )
    # By what each layer adds, not by what it inherits: ranked by SQNR, the last layers of a
    # deep network led every list with "0.0 dB lost", saying nothing of where it went.
    rows.sort(key=lambda r: (-(r["lost_db"] or 0.0), r["sqnr_db"]))
    return {
        "samples": int(np.shape(x[0] if isinstance(x, tuple) else x)[0]),
        "layers_compared": len(rows),
        "worst": rows[:top],
        "how": "SQNR of each node's output as its consumers see it (after its own Q/DQ) "
        "against fp32; lost: worst input's SQNR minus the output's, the ranking; graph "
        "optimizations off",
    }


def layer_table(report: dict[str, Any]) -> str:
    """The report as the table ``dlbench build`` prints under an INT8 verdict."""
    if report.get("error"):
        return f"per-layer error report failed: {report['error']}"
    rows = [
        [
            i + 1,
            r["node"],
            r["op"],
            f"{r['sqnr_db']:.1f}",
            "" if r["lost_db"] is None else f"{r['lost_db']:.1f}",
            "int8" if r["quantized"] else "float",
        ]
        for i, r in enumerate(report.get("worst", []))
    ]
    head = (
        f"Worst layers, fp32 vs int8 on {report.get('samples')} verification samples "
        f"({report.get('layers_compared')} compared, ranked by the dB each loses itself; "
        "SQNR: higher is better)"
    )
    return head + "\n" + markdown(("#", "Node", "Op", "SQNR (dB)", "Lost here (dB)", "Output"), rows)
