"""The native backends (PyTorch, TensorFlow, CPU-MKL, MindSpore) on resnet50-mini checkpoints
trained for one step, through the real CLI (each cell in its own process)."""

import json
import re

import pytest

from dlbench.models.registry import get_model
from tests.utils.clitools import assert_usage_error, run_cli

FAST = ("--iterations", "3", "--warmup", "1", "--max-warmup", "3")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("native")
    out = run_cli(
        "train",
        "resnet50-mini",
        "--steps",
        "1",
        "--warmup-steps",
        "0",
        "--batch-size",
        "2",
        # A checkpoint is all the benches need: no compiled step (TensorFlow's trace,
        # MindSpore's graph compile) to pay for.
        "--eager",
        "--out",
        root / "runs",
        "--db",
        root / "train.sqlite",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return root / "runs" / "resnet50-mini"


def test_native_backends_run_their_checkpoints(cli, workdir, runs):
    out = cli(
        "bench",
        str(runs / "pytorch"),
        str(runs / "tensorflow"),
        str(runs / "mindspore"),
        "-b",
        "pytorch,tensorflow,cpu-mkl,mindspore",
        "--batch-sizes",
        "2",
        *FAST,
        "--json",
        "n.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = {r["backend"]: r for r in json.loads((workdir / "n.json").read_text())}
    assert set(records) == {"pytorch", "tensorflow", "cpu-mkl", "mindspore"}
    frameworks = {
        "pytorch": "pytorch",
        "tensorflow": "tensorflow",
        "cpu-mkl": "tensorflow",
        "mindspore": "mindspore",
    }
    for backend, r in records.items():
        assert r["status"] in ("ok", "unstable"), (backend, r["error"])
        assert r["model"] == "resnet50-mini" and r["batch_size"] == 2 and r["iterations"] == 3
        assert r["framework"] == frameworks[backend] and r["framework_version"]
        rt = r["context"]["runtime"]
        assert rt["device_kind"] == "cpu"
        assert rt["weights"] == str(
            runs / frameworks[backend] / r["context"]["artifact"]["path"].rsplit("/", 1)[-1]
        )
        assert r["gflops_per_sample"] == get_model("resnet50-mini").gflops_per_sample
        assert r["context"]["inputs"][0]["shape"] == [2, 3, 64, 64]
        assert r["metrics"]["cold_start"]["load_s"] > 0
    assert records["tensorflow"]["context"]["runtime"]["layout"] == "NHWC"
    assert records["mindspore"]["context"]["runtime"]["mode"] == "GRAPH_MODE"
    mkl = records["cpu-mkl"]
    env = mkl["context"]["thread_environment"]
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "1" and env["KMP_BLOCKTIME"] == "30"
    assert env["KMP_AFFINITY"] and env["OMP_NUM_THREADS"] == str(mkl["intra_op_threads"])
    assert mkl["context"]["runtime"]["onednn_enabled"] is True
    assert mkl["context"]["runtime"]["intra_op_threads"] == mkl["intra_op_threads"]
    assert (
        records["pytorch"]["context"]["runtime"]["intra_op_threads"] == records["pytorch"]["intra_op_threads"]
    )


def test_cpu_mkl_onednn_off_is_the_unoptimized_row(cli, workdir, runs):
    out = cli(
        "bench",
        str(runs / "tensorflow"),
        "-b",
        "cpu-mkl",
        "--onednn",
        "off",
        "--batch-sizes",
        "2",
        *FAST,
        "--json",
        "off.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "off.json").read_text())
    assert r["status"] != "failed", r["error"]
    assert r["context"]["thread_environment"]["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert r["context"]["runtime"]["onednn_enabled"] is False
    assert r["context"]["options"]["onednn"] == "off"
    assert re.search(r"cpu-mkl \S+ \(onednn=off\) *\|", out.stdout), out.stdout


def test_eager_runs_tensorflow_and_mindspore_op_by_op(cli, workdir, runs):
    """--eager: the call verification's reference makes (Backend.verify_options), measurable
    too; the record and the timed region say which way the network ran."""
    out = cli(
        "bench",
        str(runs / "tensorflow"),
        str(runs / "mindspore"),
        "-b",
        "tensorflow,mindspore",
        "--eager",
        "--batch-sizes",
        "2",
        *FAST,
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = {r["backend"]: r for r in json.loads((workdir / "e.json").read_text())}
    for backend, r in records.items():
        assert r["status"] in ("ok", "unstable"), (backend, r["error"])
        assert r["context"]["options"]["eager"] == "on"
        assert "op by op" in r["context"]["timed_region"]["summary"], r["context"]["timed_region"]
    assert records["tensorflow"]["context"]["runtime"]["execution"] == "eager"
    assert len(re.findall(r" \(eager\) *\|", out.stdout)) == 2, out.stdout  # the table says so too
    assert records["mindspore"]["context"]["runtime"]["mode"] == "PYNATIVE_MODE"
    assert_usage_error(
        cli("bench", str(runs / "tensorflow"), "-b", "tensorflow", "--eager", "--xla", "on"),
        "--eager with --xla",
    )
    assert_usage_error(cli("bench", "resnet50-mini", "-b", "pytorch", "--eager"), "option 'eager'")


def test_zoo_model_with_random_weights_in_bf16(cli, workdir):
    out = cli(
        "bench",
        "resnet50-mini",
        "-b",
        "pytorch",
        "--precision",
        "bf16",
        "--batch-sizes",
        "2",
        *FAST,
        "--json",
        "z.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "z.json").read_text())
    assert r["status"] != "failed", r["error"]
    assert r["precision"] == "bf16" and r["context"]["runtime"]["dtype"] == "bfloat16"
    assert r["context"]["runtime"]["weights"] == "random (seed 0)"
