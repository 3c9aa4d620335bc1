"""The precision advisor's after-the-fact lines: why a build did not pay, from profiles.

An INT8 build that runs slower than its fp32 source, or gains less than ``GAIN``,
looks like a broken build; usually it is not.  Both files are profiled at the benched
batch and threads (``dlbench profile``'s cell; not stored: ``dlbench profile`` stores) and the line
says where the INT8 graph's time went: QuantizeLinear/DequantizeLinear pairs around ops
ONNX Runtime has no int8 kernel for, those float ops themselves, and convolutions that
run no faster in int8 (depthwise ones, a 3-channel stem).  Then what to try.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness.profile.classes import op_class

GAIN = 1.2
QDQ = "quantize / dequantize"  # the op class (profile.classes.OP_CLASSES)
# Ops that compute in int8 (ONNX Runtime's fused kernels): everything else in an INT8
# graph runs in float.
INT8_OPS = (
    "QLinearConv",
    "ConvInteger",
    "QGemm",
    "QLinearMatMul",
    "MatMulInteger",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "QAttention",
)
INT8_PREFIX = "QLinear"


def computes_in_float(op: str) -> bool:
    """An op of an INT8 graph that does arithmetic in float (not a Q/DQ, not an int8
    kernel, not a shape or layout move, which runs on whatever dtype it is given)."""
    if op_class(op) == QDQ or op in INT8_OPS or op.startswith(INT8_PREFIX):
        return False
    return op_class(op) not in ("data movement", "layout (NCHWc reorder)")


def _key(r: dict[str, Any]) -> tuple:
    return (r.get("model"), r.get("backend"), r.get("device"), r.get("batch_size"), r.get("intra_op_threads"))


def slow_builds(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any], float]]:
    """(int8 record, its fp32 record, speed-up) for each INT8 ONNX cell on ONNX Runtime's
    CPU that gains less than ``GAIN`` over the fp32 file of the same model and cell."""
    measured = [r for r in records if r["status"] in ("ok", "unstable") and r.get("throughput_sps")]
    onnx = [r for r in measured if (r["context"].get("artifact") or {}).get("format") == "onnx"]
    base = {_key(r): r for r in onnx if r.get("precision") == "fp32"}
    out = []
    for r in onnx:
        ref = base.get(_key(r))
        if r.get("precision") != "int8" or r.get("backend") != "onnxruntime" or r.get("device") != "cpu":
            continue
        if ref is not None and r["throughput_sps"] < GAIN * ref["throughput_sps"]:
            out.append((r, ref, r["throughput_sps"] / ref["throughput_sps"]))
    return out


def advise(records: Sequence[dict[str, Any]]) -> list[str]:
    """The advisor's line for every INT8 cell of ``records`` that did not pay (bench's
    printout, run's Advice section)."""
    return [explain(int8, fp32, gain) for int8, fp32, gain in slow_builds(records)]


def explain(int8: dict[str, Any], fp32: dict[str, Any], gain: float) -> str:
    """The advisor's line for one slow INT8 cell (profiles both files; stores nothing)."""
    from dlbench.harness.profile.runner import ProfileRequest, profile

    def profiled(r: dict[str, Any]) -> dict[str, Any] | None:
        req = ProfileRequest(
            artifact=r["context"]["artifact"]["path"],
            batch_size=r["batch_size"],
            threads=r.get("intra_op_threads"),
            iterations=20,
            warmup=5,
            store=False,
        )
        rec = profile(req)
        return rec["metrics"].get("profile") if rec["status"] == "ok" else None

    q, f = profiled(int8), profiled(fp32)
    name = (int8["context"]["artifact"].get("path") or "").rsplit("/", 1)[-1]
    head = f"{int8['model']} INT8 ({name}) runs at {gain:.2f}x its fp32 file at batch {int8['batch_size']}"
    if q is None or f is None:
        return head + " (profiling it failed: run dlbench profile on both files)"
    return head + ": " + reasons(q, f)


def reasons(q: dict[str, Any], f: dict[str, Any]) -> str:
    """Where the INT8 profile's time went, against the fp32 one, and what to try."""
    # Shares over every node (``op_types``): the kept slowest ``nodes`` are a sample.
    shares = q["op_types"]
    qdq = sum(share for op, share in shares.items() if op_class(op) == QDQ)
    floats = {op: share for op, share in shares.items() if computes_in_float(op)}
    top = sorted(floats.items(), key=lambda kv: -kv[1])[:4]
    parts = [f"{qdq:.0%} of its time is QuantizeLinear/DequantizeLinear"]
    if top:
        parts.append("ops left in float: " + ", ".join(f"{op} {share:.0%}" for op, share in top))
    conv_q = next((c for c in q["classes"] if c["class"] == "convolution"), None)
    conv_f = next((c for c in f["classes"] if c["class"] == "convolution"), None)
    if conv_q and conv_f and conv_q.get("gflops") and conv_f.get("gflops"):
        parts.append(
            f"its convolutions run at {conv_q['gflops']:.3g} GFLOP/s in int8 against "
            f"{conv_f['gflops']:.3g} in fp32"
            + (
                " (depthwise and few-channel ones gain little in int8)"
                if conv_q["gflops"] < 2 * conv_f["gflops"]
                else ""
            )
        )
    tries = []
    if qdq >= 0.1 and top:
        tries.append(f"the Q/DQ pairs around {top[0][0]} (no int8 kernel here): the same file on -b openvino")
    tries.append(f"{'or ' if tries else ''}keep fp32 for this model on this CPU")
    return "; ".join(parts) + ". Try: " + ", ".join(tries) + " (dlbench profile FILE shows every node)"
