"""``dlbench profile``: where an ONNX model's time goes, from ONNX Runtime's profiler in a cell
of its own, warm-up excluded, per op class beside the class's FLOPs, stored as a record; and
what profile refuses before any framework loads.  Core group: ONNX Runtime only (PyTorch's
profiles: test_profile_pytorch.py)."""

from __future__ import annotations

import json
import zipfile

import pytest

from dlbench.harness.profile.child import PLAIN_MIN_S
from dlbench.harness.profile.classes import ATEN, ATEN_CLASSES, OP_CLASSES, node_class, op_class
from dlbench.harness.profile.ort_cell import node_times, traced_bytes
from dlbench.harness.profile.summary import summarize
from dlbench.harness.store.results import ResultStore
from tests.utils import tiny_onnx
from tests.utils.clitools import assert_usage_error

ITERATIONS = 20


def test_a_profile_says_where_the_time_goes_and_is_stored(cli, workdir):
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    out = cli(
        "profile", "tiny.onnx", "--batch-size", "4", "--iterations", str(ITERATIONS), "--json", "p.json"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Where the time goes: tiny" in out.stdout and "| convolution " in out.stdout
    [rec] = json.loads((workdir / "p.json").read_text())
    p = rec["metrics"]["profile"]
    assert rec["kind"] == "profile" and rec["status"] == "ok"
    assert abs(sum(c["share"] for c in p["classes"]) - 1) < 1e-6
    assert abs(sum(p["op_types"].values()) - 1) < 1e-6  # every node, not the kept slowest
    conv = next(c for c in p["classes"] if c["class"] == "convolution")
    # Two 3x3 convolutions at 4x3x32x32 (tiny_onnx.CHW): 2 * MACs of the source graph.
    assert conv["gflop_per_run"] > 0 and conv["ms_per_run"] > 0
    # Bytes from the trace's shapes: at least the 4x3x32x32 float input the first conv reads.
    assert conv["bytes_per_run"] >= 4 * 4 * 3 * 32 * 32 and not conv["bytes_partial"]
    assert conv["flop_per_byte"] == conv["gflop_per_run"] * 1e9 / conv["bytes_per_run"]
    assert "| MB / run | FLOP / B |" in out.stdout
    # ONNX Runtime names no op a node spent its time in: no column the profiler never fills.
    assert "Spent in" not in out.stdout
    assert p["node_count"] >= 3 and p["nodes"][0]["us"] >= p["nodes"][-1]["us"]
    # The same runs timed with no profiler too (what the profiler's own cost is measured
    # against), on the title line.
    assert p["plain_ms_per_run"] > 0 and f"; {p['plain_ms_per_run']:.3g} ms a run unprofiled" in out.stdout
    # Timed as a bench cell: a window of PLAIN_MIN_S at least, whatever the run count
    # asked (a few runs of a small network were a few ms, one scheduler pause in them).
    assert p["plain_window_s"] >= PLAIN_MIN_S and p["plain_runs"] >= ITERATIONS
    assert p["plain_ms_per_run"] == pytest.approx(p["plain_window_s"] * 1000 / p["plain_runs"])
    assert [i["shape"] for i in rec["context"]["inputs"]] == [[4, *tiny_onnx.CHW]]
    assert ResultStore(workdir / "results.sqlite").records("kind = 'profile'", [])
    report = cli("report")
    assert report.returncode == 0, report.stderr
    assert "## Where the time goes (dlbench profile)" in report.stdout

    # An INT8 build's profile shows its quantized convolutions and the Q/DQ around them.
    assert cli("build", "tiny.onnx", "--to", "int8", "--out", "tiny.int8.onnx", "-q").returncode in (0, 1)
    out = cli("profile", "tiny.int8.onnx", "--iterations", "10", "--json", "q.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "q.json").read_text())
    ops = {op for c in rec["metrics"]["profile"]["classes"] for op in c["ops"]}
    assert "QLinearConv" in ops or "QuantizeLinear" in ops, ops


def test_what_profile_cannot_read_is_one_line(cli, workdir):
    """Refused before any cell starts: a Keras file or a SavedModel (recognized, not
    probed, so TensorFlow never loads), options for the other backend, a device the
    profiler does not time."""
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    with zipfile.ZipFile(workdir / "m.keras", "w") as z:  # what a Keras 3 file holds
        z.writestr("config.json", "{}")
        z.writestr("metadata.json", "{}")
    (workdir / "sm").mkdir()
    (workdir / "sm" / "saved_model.pb").write_bytes(b"")
    reads = "dlbench profile reads ONNX files (ONNX Runtime's profiler), PyTorch models"
    assert_usage_error(cli("profile", "m.keras"), "m.keras: a Keras 3 model file", reads, "export it first")
    assert_usage_error(cli("profile", "sm"), "a TensorFlow SavedModel directory", reads)
    assert_usage_error(cli("profile", "keras:MobileNetV3Small"), "a keras.applications model", reads)
    assert_usage_error(cli("profile", "tiny.onnx", "--iterations", "0"), "--iterations 0")
    assert_usage_error(cli("profile", "tiny.onnx", "--device", "cuda"), "profiles on cpu")
    assert_usage_error(cli("profile", "tiny.onnx", "--precision", "bf16"), "its own precision")
    assert_usage_error(cli("profile", "lenet5", "--graph-optimization", "basic"), "runs on pytorch")
    assert_usage_error(cli("profile"), "give one model")
    weights = "loads into a --model-from model or one model by name"
    assert_usage_error(cli("profile", "tiny.onnx", "--weights", "tiny.onnx"), weights)


def test_warm_up_runs_are_left_out_of_the_node_times():
    """Two warm-up runs (slow: 100 µs a node) and two measured ones (10 µs): 10 µs a run."""
    events = []
    for k, us in enumerate((100, 100, 10, 10)):
        t = k * 1000
        events.append({"cat": "Session", "name": "model_run", "ts": t, "dur": 500})
        events.append(
            {"cat": "Node", "name": "c1_kernel_time", "ts": t + 1, "dur": us, "args": {"op_name": "Conv"}}
        )
    [row] = node_times(events, warmup=2, iterations=2)
    assert row == {"node": "c1", "op": "Conv", "provider": None, "us": 10.0, "at": 0}
    # A node's bytes: what its trace event says it read and wrote, counted once a run.
    shapes = {
        "input_type_shape": [{"float": [2, 3]}, {"int64": [4]}],
        "output_type_shape": [{"float16": [2, 5]}],
    }
    assert traced_bytes(shapes) == 2 * 3 * 4 + 4 * 8 + 2 * 5 * 2
    assert traced_bytes({"input_type_shape": [{"seq": [2]}]}) is None and traced_bytes({}) is None
    assert (
        op_class("QLinearConv") == "convolution" and op_class("DequantizeLinear") == "quantize / dequantize"
    )
    assert op_class("NoSuchOp") == "other"


def test_aten_ops_share_the_onnx_classes():
    """One set of classes: every aten class is an ONNX one, an in-place op is its op's, and
    an undeclared op a model calls takes the class of the op it spent its time in."""
    assert set(ATEN_CLASSES) <= set(OP_CLASSES)
    assert op_class(ATEN + "conv2d") == op_class("Conv") == "convolution"
    assert op_class(ATEN + "addmm") == op_class("Gemm") == "matmul / gemm"
    assert op_class(ATEN + "relu_") == op_class("Relu") == "activation"
    assert op_class(ATEN + "native_layer_norm") == "normalization"
    assert op_class(ATEN + "no_such_op") == "other"
    assert node_class({"op": "aten::_my_fused_linear", "kernel": "aten::addmm"}) == "matmul / gemm"


class _Declared:
    tool, flops_source, bytes_source = "a profiler", "its counts", "its inputs"


def test_a_class_with_uncounted_ops_is_partial_not_invented():
    """FLOPs and bytes per class from the nodes' own counts: a node without one makes its
    class partial, and the class's GFLOP/s is the counted nodes' over their own time."""
    nodes = [
        {"node": "a", "op": "aten::conv2d", "us": 100.0, "flops": 2_000_000, "bytes": 4000},
        {"node": "b", "op": "aten::conv1d", "us": 100.0, "flops": None, "bytes": 1000},
        {"node": "c", "op": "aten::relu", "us": 50.0, "flops": None, "bytes": None},
    ]
    p = summarize({"nodes": nodes, "wall_ms_per_run": 1.0}, None, 1, _Declared())
    conv, act = p["classes"]
    assert (conv["class"], conv["gflop_per_run"], conv["flops_partial"]) == ("convolution", 0.002, True)
    assert conv["gflops"] == 0.002 / 100e-6  # node a's FLOPs over node a's time, not b's too
    assert (conv["bytes_per_run"], conv["bytes_partial"], conv["flop_per_byte"]) == (5000, False, 500)
    assert (act["gflop_per_run"], act["flops_partial"], act["bytes_per_run"]) == (None, False, None)
    assert abs(sum(c["share"] for c in p["classes"]) - 1) < 1e-9
    assert p["nodes"][0]["flop_per_byte"] == 500 and "flop_per_byte" not in p["nodes"][1]


def _bench(precision, throughput, path):
    return {
        "status": "ok",
        "model": "m",
        "backend": "onnxruntime",
        "device": "cpu",
        "batch_size": 32,
        "intra_op_threads": 2,
        "precision": precision,
        "throughput_sps": throughput,
        "context": {"artifact": {"format": "onnx", "path": path}},
    }


def test_an_int8_build_that_does_not_pay_is_explained_from_its_profiles():
    from dlbench.harness.profile.advice import reasons, slow_builds

    fp32, slow = _bench("fp32", 100.0, "m.onnx"), _bench("int8", 96.0, "m.int8.onnx")
    assert [(a["precision"], b["precision"], round(g, 2)) for a, b, g in slow_builds([fp32, slow])] == [
        ("int8", "fp32", 0.96)
    ]
    fast = _bench("int8", 250.0, "m.int8.onnx")
    assert slow_builds([fp32, fast]) == []  # 2.5x: nothing to explain
    q = {
        "op_types": {
            "QLinearConv": 0.5,
            "HardSigmoid": 0.2,
            "DequantizeLinear": 0.15,
            "Transpose": 0.1,  # moves data in any dtype: not "left in float"
            "QuantizeLinear": 0.05,
        },
        "classes": [{"class": "convolution", "gflops": 60.0}],
    }
    f = {"nodes": [], "classes": [{"class": "convolution", "gflops": 40.0}]}
    line = reasons(q, f)
    assert line.startswith(
        "20% of its time is QuantizeLinear/DequantizeLinear; ops left in float: HardSigmoid 20%"
    )
    assert "Transpose" not in line and "60 GFLOP/s in int8 against 40 in fp32" in line
    assert "around HardSigmoid" in line and "-b openvino" in line and ", or keep fp32" in line
    # With nothing else to try, the one suggestion reads on its own (no dangling "or").
    alone = reasons({"op_types": {"QLinearConv": 1.0}, "classes": []}, {"nodes": [], "classes": []})
    assert "Try: keep fp32 for this model" in alone, alone


def test_an_onnx_file_profiles_on_openvino_by_its_counters(cli, workdir):
    """``--backend openvino``: the CPU plugin's performance counters, read after every
    measured run.  The plugin names a fused node after its last source node (the MLP's
    MatMul, bias and Relu run as one FullyConnected named after the Relu's output): it is
    classed by everything it was made of, so the time is the matmul's, not an activation's."""
    tiny_onnx.save(tiny_onnx.mlp(hidden=256), workdir / "mlp.onnx")
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    args = ["-b", "openvino", "--iterations", "50", "--batch-size", "8", "--threads", "1", "--json", "m.json"]
    out = cli("profile", "mlp.onnx", *args)
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "m.json").read_text())
    p = rec["metrics"]["profile"]
    assert rec["backend"] == "openvino" and p["profiler"] == "OpenVINO's performance counters"
    assert "openvino" in out.stdout.splitlines()[0] and "performance counters" in p["node_time"]
    # Compiled at the one shape it runs, as bench's cells compile it (dynamic, the plugin
    # left most of some graphs' nodes uncounted).
    assert rec["context"]["runtime"]["shapes"] == "static input=8x3x16x16"
    shares = {c["class"]: c["share"] for c in p["classes"]}
    assert shares["matmul / gemm"] > 0.5, shares
    assert all(n["kernel"] and n["us"] >= 0 for n in p["nodes"])
    fused = [n for n in p["nodes"] if n["kernel"] == "FullyConnected"]
    assert len(fused) == 2 and all(n["class"] == "matmul / gemm" for n in fused), p["nodes"]
    assert {n["node"] for n in fused} <= {"h", "hb", "hr", "o", "logits"}  # source names
    # Unprofiled runs timed on a runner of their own, as ONNX Runtime's profiles are.
    assert p["plain_ms_per_run"] > 0 and p["plain_runs"] >= 1
    out = cli("profile", "tiny.onnx", "--backend", "openvino", "--iterations", "5", "--json", "t.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "t.json").read_text())
    conv = next(c for c in rec["metrics"]["profile"]["classes"] if c["class"] == "convolution")
    assert conv["ms_per_run"] > 0 and conv["gflop_per_run"] > 0  # the source graph's FLOPs
    # What it cannot do is one line, before any cell.
    there = "is profiled on onnxruntime, openvino, not there"
    assert_usage_error(cli("profile", "tiny.onnx", "-b", "tensorflow"), "--backend tensorflow", there)
    assert_usage_error(
        cli("profile", "tiny.onnx", "-b", "openvino", "--graph-optimization", "basic"),
        "runs on openvino, which has no such option",
    )


def test_openvino_s_counters_are_read_after_the_warm_up_and_after_the_measured_runs():
    """Each counter is its node's mean over every run since compiling, the warm-up's too:
    a node's time per measured run is the difference of the two totals (here a 410 µs
    first run in a warm-up of 2, then 18 runs of 90 µs), plus the half µs each run's
    truncation took off; a node that did not run (an in-place Reshape) is left out."""
    import datetime
    from types import SimpleNamespace

    from dlbench.harness.profile.ov_cell import node_times

    class Info(SimpleNamespace):
        Status = SimpleNamespace(EXECUTED="executed", NOT_RUN="not run")

    def read(conv_mean: float, pool_mean: float) -> list[Info]:
        def info(name, kind, us, status="executed"):
            took = datetime.timedelta(microseconds=us)
            return Info(node_name=name, node_type=kind, exec_type="jit", real_time=took, status=status)

        return [
            info("x", "Parameter", 0, "not run"),
            info("c1", "Convolution", conv_mean),
            info("p", "MaxPool", pool_mean),
            info("r", "Reshape", 0, "not run"),
        ]

    before = read((410 + 90) / 2, 1)  # whole µs, as the counters give them
    after = read((410 + 90 + 18 * 90) / 20, 1)
    found = node_times(before, after, 2, 18, {"c1": ("Conv", "c1", None)})
    assert found["optimized_nodes"] == 2
    conv, pool = found["nodes"]
    assert conv["node"] == "c1" and conv["op"] == "Conv" and conv["kernel"] == "Convolution"
    assert conv["us"] == pytest.approx(90.5) and pool["us"] == pytest.approx(1.5)
    assert [conv["at"], pool["at"]] == [0, 1]  # the order the plugin ran them in
    # Without a warm-up there is nothing to take off.
    alone = node_times([], after, 0, 20, {})["nodes"][0]
    assert alone["us"] == pytest.approx(106.5) and alone["op"] == "Convolution"
