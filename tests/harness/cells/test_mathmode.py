"""fp32 means IEEE fp32 on every device, and backends that cannot lie about where they ran.

Through the real CLI (cells in their own processes, real frameworks): every
record carries the math mode its cell read back, tf32 is refused on a CPU with
the reason, an environment that contradicts fp32 refuses the run.  In-process
tests (framework-marked) set a switch the wrong way first, so the helper has
something to undo, and drive the real runners to the fallback checks.  The
GPU and Ascend halves are in test_bench_gpu.py.
"""

import json
import subprocess
import sys

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.cells import mathmode
from tests.utils import benchmodels

FAST = ("--batch-sizes", "2", "--min-duration", "0.05", "--min-iterations", "3", "--warmup", "1")


def test_every_bench_cell_records_the_ieee_math_its_framework_read_back(cli, workdir):
    mlp = benchmodels.mlp(workdir / "mlp.onnx")
    out = cli(
        "bench",
        "lenet5",
        str(mlp),
        "-b",
        "pytorch",
        "-b",
        "tensorflow",
        "-b",
        "onnxruntime",
        *FAST,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    runs = {r["backend"]: r for r in json.loads((workdir / "b.json").read_text())}
    assert set(runs) == {"pytorch", "tensorflow", "onnxruntime"}
    for r in runs.values():
        assert r["status"] != "failed", r["error"]
        assert r["context"]["math_mode"] == r["context"]["runtime"]["math_mode"]
        assert r["context"]["math_mode"]["env"] == {}
    torch = runs["pytorch"]["context"]["math_mode"]
    # cuDNN's convolution switch defaults to tf32 in PyTorch: the cell turned it to ieee.
    assert torch["torch.cudnn.conv"] == torch["torch.cuda.matmul"] == "ieee"
    assert torch["torch.mkldnn.matmul"] == torch["torch.mkldnn.conv"] == "ieee"
    tf = runs["tensorflow"]["context"]
    assert tf["math_mode"]["tf.tensor_float_32_execution"] is False
    assert tf["runtime"]["soft_device_placement"] is False
    ort = runs["onnxruntime"]["context"]["math_mode"]
    assert ort["ort." + mathmode.ORT_ARM64_FASTMATH] == "0"


def test_training_records_the_math_mode_in_force(cli, workdir):
    out = cli(
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--steps",
        "1",
        "--warmup-steps",
        "0",
        "--batch-size",
        "4",
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "t.json").read_text())
    assert r["context"]["math_mode"]["torch.cudnn.conv"] == "ieee"
    assert r["context"]["math_mode"] == r["context"]["runtime"]["math_mode"]


def test_tf32_on_a_cpu_is_refused_with_the_reason(cli, workdir):
    out = cli("bench", "lenet5", "-b", "pytorch", "--precision", "tf32")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "TensorFloat-32" in out.stderr and "compute capability 8.0" in out.stderr
    # Across every backend, tf32 where none can run it: the same reason, nothing run.
    out = cli("bench", "lenet5", "-b", "all", "--precision", "tf32")
    assert out.returncode == 2 and "skipped: --precision tf32" in out.stderr
    out = cli("train", "lenet5", "-f", "pytorch", "--precision", "tf32")
    assert out.returncode == 2 and "TensorFloat-32" in out.stderr


def test_a_math_variable_that_contradicts_fp32_refuses_before_any_cell(cli, workdir):
    out = cli("bench", "lenet5", "-b", "pytorch", *FAST, env={"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"})
    assert out.returncode == 2 and "ONEDNN_DEFAULT_FPMATH_MODE=BF16" in out.stderr
    assert "lenet5 on pytorch" not in out.stderr  # refused by the plan, not by a cell


def test_tf32_and_an_override_that_forbids_it_are_refused(monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    with pytest.raises(UserError, match="NVIDIA_TF32_OVERRIDE=0"):
        mathmode.check_env("tf32")
    assert mathmode.check_env("fp32") == {"NVIDIA_TF32_OVERRIDE": "0"}
    monkeypatch.setenv("TF_SET_ONEDNN_FPMATH_MODE", "STRICT")
    assert mathmode.check_env("fp32")["TF_SET_ONEDNN_FPMATH_MODE"] == "STRICT"
    # A GPU cell starts with the override, a tf32 one without it; the CPU needs none.
    assert mathmode.environment("cuda", "fp32") == {"NVIDIA_TF32_OVERRIDE": "0"}
    assert mathmode.environment("cuda", "tf32") == mathmode.environment("cpu", "fp32") == {}


@pytest.mark.pytorch
def test_torch_math_undoes_a_reduced_precision_switch_and_reads_it_back():
    import torch

    onednn = torch.backends.mkldnn.matmul
    before = onednn.fp32_precision
    try:
        onednn.fp32_precision = "bf16"  # someone asked oneDNN for bf16 float32 math
        mode = mathmode.torch_math(torch, "cpu", "fp32")
        assert mode["torch.mkldnn.matmul"] == onednn.fp32_precision == "ieee"
        with pytest.raises(UserError, match="TensorFloat-32"):
            mathmode.torch_math(torch, "cpu", "tf32")
    finally:
        onednn.fp32_precision = before


SOFT_PLACEMENT_PROBE = """
import numpy as np
import tensorflow as tf

from dlbench.harness.backends import get_backend
from dlbench.harness.backends.base import ArtifactRef, FellBack, RunConfig
from dlbench.harness.formats import ZOO

tf.config.experimental.enable_tensor_float_32_execution(True)
tf.config.set_soft_device_placement(True)
backend = get_backend("tensorflow")
runner = backend.runner(ArtifactRef(None, ZOO, "lenet5"),
                        RunConfig("cpu", "fp32", 1, 1, options=backend.resolve_options({})))
runner.load()
runner.run(runner.prepare({"input": np.zeros((2, 1, 32, 32), np.float32)}))
runtime = runner.runtime()
assert runtime["soft_device_placement"] is False, runtime
assert runtime["math_mode"]["tf.tensor_float_32_execution"] is False, runtime
runner.verify(runtime)
tf.config.set_soft_device_placement(True)
try:
    runner.verify(runner.runtime())
except FellBack as exc:
    assert "soft device placement" in str(exc), exc
    print("REFUSED")
"""


@pytest.mark.tensorflow
def test_tensorflow_soft_placement_is_off_and_a_runner_with_it_on_fails():
    """In a fresh process, as a cell runs it: TensorFlow fixes its thread pools when its
    context starts, so a runner loaded after other tests' TensorFlow work would refuse."""
    proc = subprocess.run(
        [sys.executable, "-c", SOFT_PLACEMENT_PROBE], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "REFUSED"


PLACEMENT_PROBE = """
import numpy as np
import mindspore as ms

from dlbench.harness.backends import get_backend
from dlbench.harness.backends.base import ArtifactRef, FellBack, RunConfig
from dlbench.harness.formats import ZOO
from dlbench.harness.backends.mindspore import place, tensor_device

runner = get_backend("mindspore").runner(ArtifactRef(None, ZOO, "lenet5"),
                                         RunConfig("cpu", "fp32", 1, 1))
runner.load()
runner.run(runner.prepare({"input": np.zeros((2, 1, 32, 32), np.float32)}))
runner.sync()
runtime = runner.runtime()
assert runtime["output_device"] == ["cpu"] and runtime["device_source"] == "output tensors", runtime
assert runtime["device_kind"] == "cpu" and runtime["input_device"] == ["cpu"], runtime
runner.verify(runtime)
# The same run judged as an Ascend cell: its outputs say CPU, so it fell back.
runner.cfg.device = "ascend"
try:
    runner.verify(runner.runtime())
except FellBack as exc:
    assert "asked for ascend, the backend ran on cpu" in str(exc), exc
    print("REFUSED")
# Placing inputs under GRAPH_MODE goes through PyNative (move_to's documented mode) and back.
[moved] = place(ms, [ms.Tensor(np.ones(3, np.float32))], "CPU")
assert tensor_device(moved) == "cpu" and ms.get_context("mode") == ms.GRAPH_MODE
print("PLACED")
"""


@pytest.mark.mindspore
def test_mindspore_reads_where_the_outputs_live_not_the_configured_target():
    """In a fresh process, as a cell runs it: MindSpore fixes its device once a kernel ran."""
    proc = subprocess.run(
        [sys.executable, "-c", PLACEMENT_PROBE], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-2:] == ["REFUSED", "PLACED"]
