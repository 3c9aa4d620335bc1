"""The silent-fallback check on a GPU: a cell whose graph ONNX Runtime would run partly on
the CPU must fail, not report a CPU number under a "cuda" label.

Writes two tiny ONNX files: an MLP (every node has a CUDA kernel: the cell must run on
CUDAExecutionProvider) and a graph with ``Unique`` (no CUDA kernel in ONNX Runtime: the
cell must fail, naming the fallback).  Prints the two verdicts; exit 1 when either is
wrong.

    python benchmarks/gpu_fallback.py WORKDIR
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR = 10  # read by every ONNX Runtime dlbench supports


def _save(graph, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def mlp(path: Path) -> Path:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 32), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])],
        [w],
    )
    return _save(graph, path)


def unique(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Unique", ["r"], ["y"], sorted=1)],
        "unique",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
    )
    return _save(graph, path)


def bench(path: Path, out: Path) -> tuple[int, list[dict], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "dlbench.harness", "bench", str(path), "-b", "onnxruntime"]
        + ["--device", "cuda", "--batch-sizes", "4", "--min-iterations", "5", "--json", str(out)],
        capture_output=True,
        text=True,
    )
    records = json.loads(out.read_text()) if out.exists() else []
    return proc.returncode, records, proc.stderr.strip()


def main() -> int:
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    ok = True
    rc, recs, err = bench(mlp(work / "mlp.onnx"), work / "fallback-mlp.json")
    providers = recs[0]["context"]["runtime"]["providers"] if recs and recs[0]["status"] != "failed" else None
    good = rc == 0 and providers and providers[0] == "CUDAExecutionProvider"
    print(f"MLP on cuda: exit {rc}, providers {providers}: {'OK' if good else 'WRONG'}\n{err[-800:]}")
    ok &= bool(good)
    rc, recs, err = bench(unique(work / "unique.onnx"), work / "fallback-unique.json")
    why = str(recs[0].get("error") if recs else (err.splitlines() or [""])[-1])
    # Refused for the right reason: ONNX Runtime's own word that nodes were placed on the
    # CPU provider.  Any other refusal (no GPU, or the CPU build of ONNX Runtime: "needs
    # onnxruntime-gpu", which an H100 run read as a pass) proves nothing about placement.
    failed = rc != 0 and not any(r.get("status") not in ("failed", None) for r in recs)
    failed = failed and "assigned to the default CPU EP" in why
    print(f"Unique on cuda (no CUDA kernel): exit {rc}, {why}: {'OK, refused' if failed else 'WRONG'}")
    ok &= failed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
