"""``dlbench profile`` of PyTorch models: the PyTorch profiler over the PyTorch backend's own
runner, each op the model calls named by its module, summed per op class beside the
profiler's FLOPs and the ops' input bytes, stored as a ``profile`` record and reported.
PyTorch group (the models are saved here with torch)."""

from __future__ import annotations

import torch

from dlbench.harness.store.results import ResultStore

# The same small nn.Module the user-model tests build by --model-from.
from tests.harness.test_user_models import PYTORCH_CODE
from tests.utils.clitools import only_record, write_module

FAST = ("--iterations", "5", "--warmup", "2", "--threads", "1")


def _classes(rec):
    return {c["class"]: c for c in rec["metrics"]["profile"]["classes"]}


def test_a_zoo_model_on_pytorch_says_where_the_time_goes_and_is_reported(cli, workdir):
    out = cli("profile", "lenet5", "--batch-size", "4", *FAST, "--json", "p.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Where the time goes: lenet5 (lenet5), pytorch" in out.stdout, out.stdout
    rec = only_record(workdir, "p.json")
    p = rec["metrics"]["profile"]
    assert (rec["kind"], rec["status"], rec["backend"]) == ("profile", "ok", "pytorch")
    assert (rec["device"], rec["precision"], rec["context"]["runtime"]["dtype"]) == ("cpu", "fp32", "float32")
    assert rec["context"]["runtime"]["intra_op_threads"] == 1  # bench's runner, bench's threads
    assert abs(sum(c["share"] for c in p["classes"]) - 1) < 1e-6
    assert abs(sum(n["us"] for n in p["nodes"]) / 1000 - p["node_ms_per_run"]) < 1e-6  # every node kept
    # One thread: the nodes' times are disjoint stretches of the runs, each nested op
    # counted once, in the op the model called.
    assert 0 < p["node_ms_per_run"] <= p["wall_ms_per_run"] and p["plain_ms_per_run"] > 0
    classes = _classes(rec)
    # LeNet-5 at batch 4 (1x32x32): conv1 5x5, 1->6 channels, to 28x28; conv2 5x5, 6->16, to
    # 10x10; fc 400->120->84->10.  The profiler's FLOPs are 2 per multiply-add.
    conv_flops = 2 * 4 * (6 * 28 * 28 * 25 * 1 + 16 * 10 * 10 * 25 * 6)
    fc_flops = 2 * 4 * (400 * 120 + 120 * 84 + 84 * 10)
    assert round(classes["convolution"]["gflop_per_run"] * 1e9) == conv_flops
    assert round(classes["matmul / gemm"]["gflop_per_run"] * 1e9) == fc_flops
    assert classes["convolution"]["ops"] == ["aten::conv2d"] and classes["convolution"]["nodes"] == 2
    assert not classes["convolution"]["flops_partial"] and classes["convolution"]["gflops"] > 0
    assert classes["activation"]["gflop_per_run"] is None  # the profiler counts no relu: unknown
    nodes = {n["node"]: n for n in p["nodes"]}
    conv1 = nodes["conv1/conv2d"]  # named by the module that called it
    assert conv1["class"] == "convolution" and conv1["kernel"].startswith("aten::")
    assert conv1["flops"] == 2 * 4 * 6 * 28 * 28 * 25
    assert conv1["bytes"] == 4 * (4 * 32 * 32 + 6 * 25 + 6)  # input, weight, bias in float32
    assert conv1["flop_per_byte"] == conv1["flops"] / conv1["bytes"]
    assert "| conv1/conv2d " in out.stdout and "MB / run" in out.stdout and "| Spent in " in out.stdout
    assert ResultStore(workdir / "results.sqlite").records("kind = 'profile'", [])
    report = cli("report")
    assert report.returncode == 0, report.stderr
    section = report.stdout.split("## Where the time goes (dlbench profile)")[1]
    assert "LeNet-5" in section and "pytorch cpu fp32" in section and "convolution" in section
    assert "The PyTorch profiler, warm-up excluded" in section


def test_a_model_from_code_and_its_torchscript_file(cli, workdir):
    """--model-from code runs eager (its modules name the nodes); the same model saved as
    TorchScript runs its ops below its root, named by op.  Both are the user's model,
    sized by --shape, on the backend bench uses."""
    module = write_module(workdir, "small_model", PYTORCH_CODE)
    torch.jit.script(module.small().eval()).save(str(workdir / "small.pt"))
    shape = ("--shape", "image=1x3x16x16", "--batch-size", "2")
    out = cli("profile", "--model-from", "small_model.py:small", *shape, *FAST, "--json", "code.json")
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "code.json")
    assert rec["status"] == "ok" and rec["context"]["artifact"]["format"] == "pytorch-model"
    assert rec["context"]["inputs"][0]["shape"] == [2, 3, 16, 16]
    classes = _classes(rec)
    assert {"convolution", "matmul / gemm", "reduction", "activation"} <= set(classes)
    assert round(classes["convolution"]["gflop_per_run"] * 1e9) == 2 * 2 * 8 * 16 * 16 * 27
    assert {n["node"] for n in rec["metrics"]["profile"]["nodes"]} >= {"conv/conv2d", "head/linear"}

    out = cli("profile", "small.pt", *shape, *FAST, "--json", "ts.json")
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "ts.json")
    assert rec["context"]["runtime"]["source"]["kind"] == "torchscript"
    assert round(_classes(rec)["convolution"]["gflop_per_run"] * 1e9) == 2 * 2 * 8 * 16 * 16 * 27
    assert "conv2d" in {n["node"] for n in rec["metrics"]["profile"]["nodes"]}


def test_bf16_counts_two_bytes_an_element(cli, workdir):
    """The runner casts the model and its inputs to the asked precision, as bench does;
    each op's input bytes follow the dtype the profiler recorded."""
    out = cli("profile", "lenet5", "--precision", "bf16", "--batch-size", "4", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "b.json")
    assert rec["precision"] == "bf16" and rec["context"]["runtime"]["dtype"] == "bfloat16"
    conv1 = next(n for n in rec["metrics"]["profile"]["nodes"] if n["node"] == "conv1/conv2d")
    assert conv1["bytes"] == 2 * (4 * 32 * 32 + 6 * 25 + 6)
    assert conv1["flops"] == 2 * 4 * 6 * 28 * 28 * 25  # the same arithmetic in any dtype
