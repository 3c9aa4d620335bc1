"""The token-input chain end to end, through the CLI: lstm-tiny trained in all three
frameworks, exported to verified ONNX, built to INT8/FP16, benchmarked on ONNX
Runtime and on the native backends.

Core group: every framework runs in the CLI's subprocesses; this process reads
JSON records and ONNX files only.  One chain per module (about a minute of
wall time, mostly framework start-ups); the tests below read its results.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.utils.clitools import run_cli
from tests.utils.frameworks import FRAMEWORKS

MODEL = "lstm-tiny"
SEQ, VOCAB = 32, 256
QUICK = ("--iterations", "5", "--warmup", "1", "--max-warmup", "1", "--threads", "1")


class Chain:
    def __init__(self, root: Path):
        self.root, self.runs = root, root / "runs"
        self.env = {"DLBENCH_DB": str(root / "results.sqlite"), "CUDA_VISIBLE_DEVICES": ""}

    def __call__(self, name: str, *args: str) -> list[dict]:
        out = self.root / f"{name}.json"
        done = run_cli(*args, "--json", out, env=self.env, cwd=self.root)
        self.last = done
        assert out.is_file(), (
            f"dlbench {args[0]} wrote no records (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
        return json.loads(out.read_text())

    def run_dir(self, fw: str) -> Path:
        return self.runs / MODEL / fw


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    c = Chain(tmp_path_factory.mktemp("token-chain"))
    c.train = c(
        "train",
        "train",
        MODEL,
        "-f",
        ",".join(FRAMEWORKS),
        "--batch-size",
        "8",
        "--steps",
        "8",
        "--warmup-steps",
        "1",
        "--lr",
        "0.5",
        "--threads",
        "1",
        "--out",
        str(c.runs),
    )
    c.export = c("export", "export", *(str(c.run_dir(fw)) for fw in FRAMEWORKS), "--threads", "1")
    onnx_of = {fw: c.run_dir(fw) / "model.onnx" for fw in FRAMEWORKS}
    c.int8 = {
        fw: c(f"int8-{fw}", "build", str(onnx_of[fw]), "--to", "int8", "--dynamic", "--threads", "1")[0]
        for fw in ("pytorch", "mindspore")
    }
    c.fp16 = c("fp16", "build", str(onnx_of["tensorflow"]), "--to", "fp16", "--threads", "1")[0]
    c.bench_onnx = c(
        "bench-onnx",
        "bench",
        *(str(p) for p in onnx_of.values()),
        str(c.run_dir("pytorch") / "model.int8.onnx"),
        "-b",
        "onnxruntime",
        "--shape",
        f"input=1x{SEQ}",
        "--batch-sizes",
        "2",
        *QUICK,
    )
    c.bench_native = c(
        "bench-native",
        "bench",
        *(str(c.run_dir(fw)) for fw in FRAMEWORKS),
        "-b",
        "pytorch,tensorflow,mindspore",
        "--batch-sizes",
        "2",
        *QUICK,
    )
    return c


def test_every_framework_trains_and_the_loss_falls(chain):
    assert [r["framework"] for r in chain.train] == list(FRAMEWORKS)
    for r in chain.train:
        assert r["status"] == "ok", r["error"]
        losses = r["metrics"]["losses"]
        assert len(losses) == 9
        assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.05, (r["framework"], losses)
        manifest = json.loads((chain.run_dir(r["framework"]) / "manifest.json").read_text())
        assert manifest["inputs"] == [{"name": "input", "shape": [SEQ], "dtype": "int32"}]


def test_every_export_is_verified_with_integer_inputs(chain):
    for r in chain.export:
        fw = r["framework"]
        assert r["status"] == "ok", (fw, r["error"])
        verdict = r["metrics"]["verdict"]
        assert verdict["batch_sizes"] == [1, 8] and verdict["outputs"]["logits"]["top1"] == 1.0
        model = onnx.load(str(chain.run_dir(fw) / "model.onnx"))
        [inp] = model.graph.input
        assert inp.name == "input"
        assert inp.type.tensor_type.elem_type == onnx.TensorProto.INT32
        dims = [d.dim_value or d.dim_param for d in inp.type.tensor_type.shape.dim]
        # MindSpore's exporter bakes the sequence length; the others keep it dynamic.
        assert dims == ["batch", SEQ if fw == "mindspore" else "sequence"], (fw, dims)
        ops = {n.op_type for n in model.graph.node}
        assert "LSTM" in ops, (fw, ops)
    mindspore = next(r for r in chain.export if r["framework"] == "mindspore")
    assert any("Squeeze" in w for w in mindspore["context"]["export"]["rewrites"])


def test_int8_and_fp16_builds_are_verified(chain):
    for fw, r in chain.int8.items():
        assert r["status"] == "ok", (fw, r["error"])
        assert r["context"]["build_info"]["recipe"]["mode"] == "dynamic"
        ops = r["metrics"]["op_counts"]
        assert ops.get("DynamicQuantizeLSTM", 0) > 0, ops
        assert r["metrics"]["verdict"]["outputs"]["logits"]["top1"] >= 0.9
    assert chain.fp16["status"] == "ok", chain.fp16["error"]
    assert chain.fp16["precision"] == "fp16"


def test_onnx_runtime_benchmarks_every_file(chain):
    assert len(chain.bench_onnx) == 4
    for r in chain.bench_onnx:
        assert r["status"] in ("ok", "unstable"), r["error"]
        assert r["batch_size"] == 2 and r["metrics"]["iterations"] == 5
        [inp] = r["context"]["inputs"]
        # Ids drawn from the embedding table found in the graph, never past its end.
        assert inp["dtype"] == "int32" and inp["shape"] == [2, SEQ]
        assert inp["fill"] == "uniform" and inp["range"] == [0, VOCAB]
    assert {r["precision"] for r in chain.bench_onnx} == {"fp32", "int8"}


def test_native_backends_run_their_checkpoints(chain):
    assert sorted(r["backend"] for r in chain.bench_native) == sorted(FRAMEWORKS)
    for r in chain.bench_native:
        assert r["status"] in ("ok", "unstable"), (r["backend"], r["error"])
        assert r["framework"] == r["backend"]
        [inp] = r["context"]["inputs"]
        assert inp["fill"] == "uniform" and inp["range"] == [0, VOCAB]
        assert r["metrics"]["gflops_per_sample"] == pytest.approx(2 * 327_744 / 1e9)
