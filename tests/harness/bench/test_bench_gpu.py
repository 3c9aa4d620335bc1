"""GPU and Ascend cells (skipped with the reason where the hardware is absent), and the
TensorRT engine sidecar check, which needs neither.  fp32 cells must read back IEEE
float32 math and start with NVIDIA_TF32_OVERRIDE=0; tf32 is its own precision."""

import json

import pytest

from dlbench.harness.cells import mathmode
from dlbench.harness.machine.frameworks import distribution_version
from tests.utils import benchmodels

FAST = ("--min-duration", "0.3", "--min-iterations", "5", "--warmup", "2")


def test_an_engine_without_its_sidecar_is_refused(cli, workdir):
    (workdir / "model.plan").write_bytes(b"not really an engine")
    out = cli("bench", "model.plan", "-b", "tensorrt")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "no model.plan.json next to it" in out.stderr


@pytest.mark.gpu
def test_an_engine_built_for_another_gpu_is_refused(cli, workdir):
    if not distribution_version("tensorrt"):
        pytest.skip("tensorrt is not installed: pip install 'dlbench[tensorrt]'")
    (workdir / "model.plan").write_bytes(b"not really an engine")
    (workdir / "model.plan.json").write_text(
        json.dumps(
            {
                "format": "dlbench-tensorrt-engine/1",
                "tensorrt_version": distribution_version("tensorrt"),
                "gpu": {"name": "NVIDIA GeForce 256", "compute_capability": "1.0"},
                "precision": "fp32",
            }
        )
    )
    out = cli("bench", "model.plan", "-b", "tensorrt")
    assert out.returncode == 2 and "built for NVIDIA GeForce 256" in out.stderr


@pytest.mark.gpu
def test_tensorrt_builds_an_onnx_and_splits_transfers_from_compute(cli, workdir):
    if not distribution_version("tensorrt"):
        pytest.skip("tensorrt is not installed: pip install 'dlbench[tensorrt]'")
    mlp = benchmodels.mlp(workdir / "mlp.onnx")
    out = cli(
        "bench",
        str(mlp),
        "-b",
        "tensorrt",
        "--batch-sizes",
        "1,8",
        "--with-transfers",
        *FAST,
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for r in json.loads((workdir / "t.json").read_text()):
        assert r["status"] != "failed", r["error"]
        assert r["device"] == "cuda" and r["context"]["runtime"]["device_kind"] == "cuda"
        times = r["metrics"]["device_times_ms"]
        assert {"h2d_ms", "compute_ms", "d2h_ms", "event_query_host_ms"} <= set(times)
        assert times["h2d_ms"]["p50"] > 0
        region = r["context"]["timed_region"]
        assert region["host_device_copies"] is True and region["cuda_return_codes_checked"]
        assert region["event_queries_in_region"] == 3 and region["event_query_host_ms_p50"] > 0
        assert r["context"]["math_mode"]["tensorrt.builder_tf32"] is False
        assert r["context"]["math_mode"]["env"]["NVIDIA_TF32_OVERRIDE"] == "0"
    out = cli("bench", str(mlp), "-b", "tensorrt", "--cuda-graph", *FAST, "--json", "g.json")
    [r] = json.loads((workdir / "g.json").read_text())
    assert r["status"] != "failed" and r["context"]["timed_region"]["cuda_graph"] is True


@pytest.mark.gpu
def test_onnxruntime_cuda_runs_on_the_gpu_or_fails_the_cell(cli, workdir):
    if not distribution_version("onnxruntime-gpu"):
        pytest.skip("onnxruntime-gpu is not installed (the CPU build has no CUDA provider)")
    mlp = benchmodels.mlp(workdir / "mlp.onnx")
    out = cli("bench", str(mlp), "-b", "onnxruntime", "--device", "cuda", *FAST, "--json", "o.json")
    [r] = json.loads((workdir / "o.json").read_text())
    assert out.returncode == 0 and r["context"]["runtime"]["providers"][0] == "CUDAExecutionProvider"
    assert r["context"]["timed_region"]["io_binding"] is True
    # The provider's own switch, read back; the global override is left unset (it makes
    # cuDNN's frontend find no plan for some convolutions under ONNX Runtime).
    assert r["context"]["math_mode"]["ort.cuda.use_tf32"] == "0"
    assert "NVIDIA_TF32_OVERRIDE" not in r["context"]["math_mode"]["env"]


@pytest.mark.gpu
def test_pytorch_cuda_reports_device_time_and_memory(cli, workdir):
    out = cli(
        "bench",
        "resnet50-mini",
        "-b",
        "pytorch",
        "--device",
        "cuda",
        "--precision",
        "fp16",
        "--batch-sizes",
        "8",
        *FAST,
        "--json",
        "p.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "p.json").read_text())
    assert r["context"]["runtime"]["device_kind"] == "cuda"
    assert r["metrics"]["device_memory_mb"] > 0
    assert r["context"]["timed_region"]["sync"] == "torch.cuda.synchronize"


@pytest.mark.gpu
def test_pytorch_cuda_fp32_is_ieee_and_tf32_is_its_own_cell(cli, workdir):
    if "+cpu" in (distribution_version("torch") or ""):
        pytest.skip("this PyTorch is a CPU build")
    precisions = ["fp32"] + ([] if mathmode.tf32_reason("cuda") else ["tf32"])
    out = cli(
        "bench",
        "resnet50-mini",
        "-b",
        "pytorch",
        "--device",
        "cuda",
        "--batch-sizes",
        "8",
        *[a for p in precisions for a in ("--precision", p)],
        *FAST,
        "--json",
        "m.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    runs = {r["precision"]: r for r in json.loads((workdir / "m.json").read_text())}
    assert set(runs) == set(precisions)
    fp32 = runs["fp32"]["context"]["math_mode"]
    assert fp32["torch.cuda.matmul"] == fp32["torch.cudnn.conv"] == "ieee"
    assert fp32["env"]["NVIDIA_TF32_OVERRIDE"] == "0"
    if "tf32" not in runs:
        pytest.skip(mathmode.tf32_reason("cuda"))
    tf32 = runs["tf32"]["context"]["math_mode"]
    assert tf32["torch.cuda.matmul"] == tf32["torch.cudnn.conv"] == "tf32"
    assert "NVIDIA_TF32_OVERRIDE" not in tf32["env"]


@pytest.mark.gpu
def test_tensorflow_gpu_runs_ieee_with_soft_placement_off(cli, workdir):
    if not distribution_version("tensorflow"):
        pytest.skip("tensorflow is not installed: pip install 'dlbench[tensorflow]'")
    out = cli(
        "bench",
        "lenet5",
        "-b",
        "tensorflow",
        "--device",
        "cuda",
        "--batch-sizes",
        "4",
        *FAST,
        "--json",
        "t.json",
    )
    if out.returncode == 2 and "TensorFlow sees no GPU" in out.stderr:
        pytest.skip(out.stderr.strip().splitlines()[-1])
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "t.json").read_text())
    assert r["status"] != "failed", r["error"]
    assert r["context"]["runtime"]["device_kind"] == "cuda"
    assert r["context"]["runtime"]["soft_device_placement"] is False
    assert r["context"]["math_mode"]["tf.tensor_float_32_execution"] is False


@pytest.mark.ascend
def test_mindspore_on_ascend(cli, workdir):
    out = cli("bench", "resnet50-mini", "-b", "ascend", "--batch-sizes", "8", *FAST, "--json", "a.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "a.json").read_text())
    runtime = r["context"]["runtime"]
    assert r["device"] == "ascend" and runtime["device_kind"] == "ascend"
    # Where the tensors live, read from them: inputs placed ahead, outputs on the NPU.
    assert runtime["device_source"] == "output tensors" and runtime["output_device"] == ["ascend"]
    assert runtime["input_device"] == ["ascend"]
    assert r["context"]["timed_region"]["host_device_copies"] is False
    math = r["context"]["math_mode"]
    assert math["ascend.precision_mode"] == "must_keep_origin_dtype"
    assert math["ascend.matmul_allow_hf32"] == math["ascend.conv_allow_hf32"] == "0"


@pytest.mark.gpu
def test_pytorch_cuda_graph_replays_the_prepared_batch(cli, workdir):
    out = cli(
        "bench",
        "resnet50-mini",
        "-b",
        "pytorch",
        "--device",
        "cuda",
        "--batch-sizes",
        "1,8",
        "--cuda-graph",
        *FAST,
        "--json",
        "g.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for r in json.loads((workdir / "g.json").read_text()):
        assert r["status"] != "failed", r["error"]
        assert r["context"]["timed_region"]["cuda_graph"] is True
        assert r["context"]["runtime"]["cuda_graph"] is True
        assert r["context"]["runtime"]["output_device"] == "cuda"


def test_pytorch_cuda_graph_is_refused_off_a_gpu_and_with_compile(cli, workdir):
    out = cli(
        "bench", "lenet5", "-b", "pytorch", "--device", "cpu", "--cuda-graph", *FAST, "--db", "x.sqlite"
    )
    assert out.returncode == 2 and "CUDA graphs need --device cuda" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = cli("bench", "lenet5", "-b", "pytorch", "--cuda-graph", "--compile", *FAST, "--db", "x.sqlite")
    assert out.returncode == 2 and "--cuda-graph with --compile: choose one" in out.stderr


def test_the_math_variables_a_gpu_cell_starts_with_are_the_backends_to_choose():
    """NVIDIA_TF32_OVERRIDE=0 for float32 on a GPU, except where the backend's own switch
    covers every library it calls: ONNX Runtime's CUDA provider (use_tf32, read back),
    whose cuDNN frontend found no plan for ResNet-50's layer4 at batch 128 with it set."""
    from dlbench.harness.backends import get_backend

    override = {"NVIDIA_TF32_OVERRIDE": "0"}
    ort, torch_backend = get_backend("onnxruntime"), get_backend("pytorch")
    assert ort.math_environment("cuda", "fp32", {"provider": "cuda"}) == {}
    assert ort.math_environment("cuda", "fp32", {"provider": "tensorrt"}) == override
    assert torch_backend.math_environment("cuda", "fp32", {}) == override
    assert torch_backend.math_environment("cuda", "tf32", {}) == {}
    assert torch_backend.math_environment("cpu", "fp32", {}) == {}
