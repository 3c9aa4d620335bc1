"""The OpenVINO backend, for real: cells through the CLI, outputs against ONNX Runtime's,
and the read-backs that keep an "fp32" cell from running in bf16 (the CPU plugin's
default on CPUs with AVX512_BF16)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.utils import tiny_onnx
from tests.utils.clitools import assert_usage_error

ov = pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")

from dlbench.core.errors import UserError
from dlbench.harness.backends import get_backend
from dlbench.harness.backends.base import ArtifactRef, FellBack, RunConfig
from dlbench.harness.backends.openvino import bf16_here
from dlbench.harness.formats import ONNX

FAST = (
    "--min-duration",
    "0.2",
    "--min-iterations",
    "5",
    "--warmup",
    "2",
    "--max-warmup",
    "10",
    "--cv-threshold",
    "100",
)
BACKEND = get_backend("openvino")
CHW = tiny_onnx.CHW
needs_bf16 = pytest.mark.skipif(
    not bf16_here(), reason="no AVX512_BF16 or AMX on this CPU: OpenVINO's CPU plugin has no bf16 here"
)


@pytest.fixture
def tiny(workdir):
    return tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")


def _records(workdir, name):
    return json.loads((workdir / name).read_text())


def _runner(path, precision="fp32", batches=(5, 5), **options):
    cfg = RunConfig(
        device="cpu",
        precision=precision,
        intra_op_threads=1,
        inter_op_threads=1,
        options=BACKEND.resolve_options(options),
        min_batch=batches[0],
        max_batch=batches[1],
        shapes={"input": [batches[1], *CHW]},
    )
    runner = BACKEND.runner(ArtifactRef(str(path), ONNX, "tiny"), cfg)
    runner.load()
    return runner


def _images(batch, seed=0):
    return np.random.default_rng(seed).standard_normal((batch, *CHW), dtype=np.float32)


def _reference(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


def test_an_fp32_cell_runs_f32_on_the_cpu_with_the_threads_asked(cli, workdir, tiny):
    threads = "1,2" if len(os.sched_getaffinity(0)) >= 2 else "1"
    out = cli(
        "bench",
        tiny,
        "-b",
        "openvino",
        "--batch-sizes",
        "1,3",
        "--threads",
        threads,
        *FAST,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = _records(workdir, "b.json")
    assert len(records) == 2 * len(threads.split(","))
    for r in records:
        assert r["status"] in ("ok", "unstable"), r["error"]
        assert (r["backend"], r["device"], r["precision"]) == ("openvino", "cpu", "fp32")
        rt = r["context"]["runtime"]
        props = rt["properties"]
        assert rt["device_kind"] == "cpu" and props["EXECUTION_DEVICES"] == ["CPU"]
        assert props["INFERENCE_PRECISION_HINT"] == "f32"
        assert props["INFERENCE_NUM_THREADS"] == r["threads"]["intra_op"] == rt["intra_op_threads"]
        assert props["NUM_STREAMS"] == 1 and props["PERFORMANCE_HINT"] == "LATENCY"
        # Every node of the runtime graph computes in f32: no bf16 behind the label.
        assert set(rt["math_mode"]["openvino.node_precisions"]) <= {"f32", "i32", "i64"}
        assert r["context"]["math_mode"] == rt["math_mode"]
        assert rt["shapes"] == f"static input={r['batch_size']}x{'x'.join(map(str, CHW))}"
        assert rt["openvino"].startswith(r["backend_version"])
        region = r["context"]["timed_region"]
        assert "InferRequest.infer()" in region["summary"] and region["host_device_copies"] is False


def test_outputs_match_onnxruntime_static_and_dynamic(tiny):
    for batches, sizes, reshape in (
        ((5, 5), (5, 5), "auto"),
        ((1, 5), (5, 2, 5), "auto"),
        ((5, 5), (5, 5), "off"),
    ):
        runner = _runner(tiny, batches=batches, reshape=reshape)
        xs = [_images(b, seed=i) for i, b in enumerate(sizes)]
        handles = [runner.prepare({"input": x}) for x in xs]
        # Out of order: a batch prepared earlier is bound again before it runs.
        for x, h in reversed(list(zip(xs, handles))):
            runner.run(h)
            runner.sync()
            np.testing.assert_allclose(runner.outputs()["logits"], _reference(tiny, x), rtol=1e-5, atol=1e-5)
        rt = runner.runtime()
        runner.verify(rt)
        static = batches[0] == batches[1] and reshape == "auto"
        assert rt["shapes"].startswith("static" if static else "dynamic"), rt["shapes"]


def test_a_crash_compiling_at_a_fixed_shape_would_name_the_shape_and_the_dynamic_way_round(
    tiny, workdir, monkeypatch
):
    """OpenVINO 2026.4 segfaults compiling some INT8 graphs at a fixed shape and runs them
    dynamic: the step a cell names before compiling is what its failure line would end with."""
    from dlbench.harness.cells import stage

    reply = str(workdir / "out.json")
    monkeypatch.setattr(stage, "_path", None)
    stage.keep_at(reply)
    _runner(tiny, batches=(5, 5))
    assert stage.last_words(reply) == (
        " while compiling the model in OpenVINO's CPU plugin (shapes: static "
        f"input=5x{'x'.join(map(str, CHW))}); -O reshape=off compiles it with its dynamic dimensions"
    )
    _runner(tiny, batches=(5, 5), reshape="off")  # already dynamic: nothing to suggest
    assert stage.last_words(reply) == (
        " while compiling the model in OpenVINO's CPU plugin (shapes: dynamic (-O reshape=off))"
    )


def test_a_plugin_that_lowers_what_was_asked_fails_the_cell(cli, workdir, tiny):
    # Two streams for one thread: the plugin quietly runs one.
    out = cli("bench", tiny, "-b", "openvino", "--threads", "1", "-O", "streams=2", *FAST, "--json", "s.json")
    assert out.returncode == 1
    [r] = _records(workdir, "s.json")
    assert r["status"] == "failed" and "NUM_STREAMS=2 ran as 1" in r["error"], r["error"]


@needs_bf16
def test_bf16_is_a_precision_of_its_own_and_fp32_refuses_it(tiny):
    x = _images(5)
    want = _reference(tiny, x)
    fp32, bf16 = _runner(tiny, "fp32"), _runner(tiny, "bf16")
    got = {}
    for name, runner in (("fp32", fp32), ("bf16", bf16)):
        runner.run(runner.prepare({"input": x}))
        got[name] = runner.outputs()["logits"]
    np.testing.assert_allclose(got["fp32"], want, rtol=1e-5, atol=1e-5)
    err = np.abs(got["bf16"] - want).max()
    assert 1e-4 < err < 0.05 * np.abs(want).max(), err  # bf16 rounding, not garbage
    rt = bf16.runtime()
    bf16.verify(rt)
    assert rt["properties"]["INFERENCE_PRECISION_HINT"] == "bf16"
    assert "bf16" in rt["math_mode"]["openvino.node_precisions"]
    # What the plugin does by default on this CPU, under an fp32 label: refused.
    with pytest.raises(FellBack, match="INFERENCE_PRECISION_HINT=f32 ran as bf16"):
        fp32.verify(rt)


@needs_bf16
def test_a_bf16_onnx_cell_runs_and_is_recorded_as_bf16(cli, workdir):
    import ml_dtypes
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = tiny_onnx.classifier()
    g = model.graph
    weights = [
        numpy_helper.from_array(numpy_helper.to_array(t).astype(ml_dtypes.bfloat16), t.name + "_bf16")
        for t in g.initializer
    ]
    casts = [helper.make_node("Cast", [w.name], [w.name[:-5]], to=TensorProto.FLOAT) for w in weights]
    nodes = casts + list(g.node)
    del g.initializer[:], g.node[:]
    g.initializer.extend(weights)
    g.node.extend(nodes)
    onnx.save(model, str(workdir / "tiny.bf16.onnx"))
    out = cli("bench", "tiny.bf16.onnx", "-b", "openvino", "--threads", "1", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = _records(workdir, "b.json")
    assert r["status"] in ("ok", "unstable") and r["precision"] == "bf16", r["error"]
    rt = r["context"]["runtime"]
    assert rt["properties"]["INFERENCE_PRECISION_HINT"] == "bf16"
    assert "bf16" in rt["math_mode"]["openvino.node_precisions"]


@pytest.mark.skipif(bf16_here(), reason="this CPU has bf16: the refusal is for CPUs without it")
def test_bf16_is_refused_where_the_cpu_has_none(tiny):
    assert "bf16" not in BACKEND.precisions("cpu")
    with pytest.raises(UserError, match="no bf16 on this CPU"):
        _runner(tiny, "bf16")


def test_an_int8_model_computes_in_int8(cli, workdir, tiny):
    out = cli("build", tiny, "--to", "int8", "-q")
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: over tolerance, kept
    out = cli("bench", "tiny.int8.onnx", "-b", "openvino", "--threads", "1", *FAST, "--json", "i.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = _records(workdir, "i.json")
    assert r["status"] in ("ok", "unstable") and r["precision"] == "int8", r["error"]
    rt = r["context"]["runtime"]
    nodes = rt["math_mode"]["openvino.node_precisions"]
    assert rt["properties"]["INFERENCE_PRECISION_HINT"] == "f32"
    assert {"i8", "u8"} & set(nodes) and not {"bf16", "f16"} & set(nodes), nodes


def test_what_openvino_cannot_take_is_refused_in_one_line(cli, workdir, tiny):
    assert_usage_error(cli("bench", tiny, "-b", "openvino", "--precision", "tf32"), "openvino on cpu", "tf32")
    assert_usage_error(
        cli("bench", tiny, "-b", "openvino", "-O", "performance_hint=FAST"),
        "performance_hint",
        "LATENCY, THROUGHPUT",
    )
    assert_usage_error(
        cli("bench", tiny, "-b", "openvino", "-O", "nosuch=1"),
        "openvino: performance_hint, streams, pinning, reshape",
    )


def test_dlbench_backends_lists_openvino_with_its_options(cli):
    out = cli("backends", "--json")
    assert out.returncode == 0, out.stderr
    names = [r["name"] for r in json.loads(out.stdout)]
    assert names.index("openvino") == names.index("onnxruntime") + 1, names
    row = json.loads(out.stdout)[names.index("openvino")]
    assert row["available"] and row["devices"] == ["cpu"], row
    assert row["version"] == ov.__version__.split("-")[0]
    out = cli("backends", "--options", "--json")
    assert out.returncode == 0, out.stderr
    options = {r["option"]: r for r in json.loads(out.stdout) if r["backend"] == "openvino"}
    assert {k: v["default"] for k, v in options.items()} == {
        "performance_hint": "LATENCY",
        "streams": 1,
        "pinning": "on",
        "reshape": "auto",
    }
    assert options["performance_hint"]["choices"] == ["LATENCY", "THROUGHPUT"]
    assert ("bf16" in BACKEND.precisions("cpu")) == bf16_here()


def test_the_module_imports_without_openvino():
    code = (
        "import sys; import dlbench.harness.backends.openvino as m; "
        "m.BACKEND.availability(); m.BACKEND.precisions('cpu'); "
        "assert 'openvino' not in sys.modules, 'openvino imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
