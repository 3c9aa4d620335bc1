"""This machine's measured GEMM peak, so a benchmark can say what share of it it reached.

``dlbench env --peak`` runs a square matrix multiply on each device, in its
own process with the usual thread rules, and stores one ``peak`` record per
device and precision in the results database; ``dlbench bench`` divides a
cell's achieved GFLOP/s by the newest matching peak from the same machine.

* CPU, fp32: the best of numpy's ``matmul`` (the BLAS numpy ships, OpenBLAS
  in the wheels) and ONNX Runtime's MatMul (MLAS) when it is installed, on
  float32 matrices, threads = physical cores.  The best library counts: a
  peak below what a real network's convolutions reach (ONNX Runtime's
  ResNet-50 convolutions run at about 1.9x OpenBLAS's SGEMM on this project's
  Zen 5 machine) would put cells above 100 % of "peak";
* CUDA: ``torch.matmul`` in fp32 (TF32 off), fp16 and bf16, when PyTorch
  with CUDA is installed.

The figure is the best of the timed repetitions (peak, not typical): a GEMM
large enough to be compute-bound, timed for about ``seconds`` per precision.
"""
from __future__ import annotations

import time
from typing import Any

CPU_N = 2048
GPU_N = 8192


def _time_best(fn, sync, flops: float, seconds: float, min_reps: int = 3) -> dict[str, Any]:
    fn()
    sync()
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    best = min(times)
    return {"gflops": flops / best / 1e9, "best_s": best, "repetitions": len(times),
            "median_gflops": flops / sorted(times)[len(times) // 2] / 1e9}


def child(payload: dict[str, Any]) -> dict[str, Any]:
    device, seconds = payload["device"], float(payload.get("seconds", 2.0))
    if device == "cpu":
        n = int(payload.get("n") or CPU_N)
        candidates = [_numpy_gemm(n, seconds)]
        ort = _onnxruntime_gemm(n, seconds, int(payload.get("threads") or 0))
        if ort:
            candidates.append(ort)
        best = max(candidates, key=lambda c: c["gflops"])
        return {"results": [{"precision": "fp32", "n": n, **best,
                             "candidates": [{k: c[k] for k in ("library", "gflops")}
                                            for c in candidates]}]}
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        n = int(payload.get("n") or GPU_N)
        dev = torch.device("cuda", int(payload.get("device_id", 0)))
        results = []
        for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16),
                                 ("bf16", torch.bfloat16)):
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            res = _time_best(lambda: torch.matmul(a, b), lambda: torch.cuda.synchronize(dev),
                             2.0 * n ** 3, seconds)
            results.append({"precision": precision, "n": n,
                            "library": f"torch {torch.__version__} (cuBLAS)",
                            "device_name": torch.cuda.get_device_name(dev), **res})
        return {"results": results}
    raise RuntimeError(f"no GEMM micro-benchmark for device {device!r}")


def _numpy_gemm(n: int, seconds: float) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    res = _time_best(lambda: np.matmul(a, b, out=out), lambda: None, 2.0 * n ** 3, seconds)
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {}).get("name")
    except TypeError:
        blas = None
    return {"library": f"numpy {np.__version__}" + (f" ({blas})" if blas else ""), **res}


def _onnxruntime_gemm(n: int, seconds: float, threads: int) -> dict[str, Any] | None:
    """One MatMul node run by ONNX Runtime's CPU provider, or None without onnxruntime."""
    from dlbench.harness.frameworks import is_installed

    if not (is_installed("onnxruntime") and is_installed("onnx")):
        return None
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n, n]) for x in ("a", "b")],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 8)
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((n, n), dtype=np.float32) for x in ("a", "b")}
    res = _time_best(lambda: sess.run(None, feeds), lambda: None, 2.0 * n ** 3, seconds)
    return {"library": f"onnxruntime {ort.__version__} (MLAS)", "onnx": onnx.__version__, **res}


# Which measured peak a cell's precision is compared with.
PEAK_PRECISION = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "int8": None}


def lookup(store, machine_id: str, device: str, precision: str) -> dict[str, Any] | None:
    """The newest stored peak for this machine, device and precision, or None."""
    want = PEAK_PRECISION.get(precision)
    if want is None:
        return None
    rows = store.records("kind = 'peak' AND status = 'ok' AND machine_id = ? AND device = ? "
                         "AND precision = ?", (machine_id, device, want))
    if not rows:
        return None
    row = rows[-1]
    return {"gflops": row["metrics"]["gflops"], "record_id": row["id"],
            "measured_at": row["started_at"]}


def measure_peaks(db: str | None = None, seconds: float = 2.0,
                  timeout: float | None = 600) -> list[dict[str, Any]]:
    """Run the GEMM cells for every device here; store and return one record per result."""
    from dlbench.harness import records
    from dlbench.harness.context import new_run_id, now_iso
    from dlbench.harness.fingerprint import fingerprint
    from dlbench.harness.frameworks import distribution_version
    from dlbench.harness.launcher import run_cell
    from dlbench.harness.results import ResultStore
    from dlbench.harness.threads import ThreadConfig, in_force

    store = ResultStore(db)
    store.check_writable()
    fp = fingerprint()
    run_id = new_run_id()
    threads = ThreadConfig.default()
    env = threads.environment()
    devices = ["cpu"]
    torch_version = distribution_version("torch") or ""
    if fp["gpus"] and torch_version and "+cpu" not in torch_version:
        devices.append("cuda")
    out = []
    for device in devices:
        started = now_iso()
        outcome = run_cell("peak", {"device": device, "seconds": seconds,
                                    "threads": threads.intra_op}, env=env,
                           timeout=timeout)
        results = outcome.result.get("results", []) if outcome.ok else [{"precision": "fp32"}]
        for res in results:
            identity = {"device": device, "precision": res["precision"],
                        "machine_id": fp["machine_id"], "started_at": started}
            record = records.new_record(
                "peak", run_id=run_id, identity=identity, started=started, argv=None,
                device=device, fp=fp, status="ok" if outcome.ok else "failed",
                error=outcome.error, duration_s=outcome.wall_s, precision=res["precision"],
                intra_op_threads=threads.intra_op, inter_op_threads=threads.inter_op,
                metrics={k: res.get(k) for k in ("gflops", "median_gflops", "best_s",
                                                 "repetitions", "n", "candidates")})
            record["context"].update({"thread_environment": in_force(env),
                                      "library": res.get("library"), "n": res.get("n"),
                                      "device_name": res.get("device_name")})
            record["id"] = store.add(record, fp)
            out.append(record)
    return out
