"""This machine's measured GEMM peak, so a benchmark can say what share of it it reached.

``dlbench env --peak`` runs a square matrix multiply on each device, in its
own process with the usual thread rules, and stores one ``peak`` record per
device and precision in the results database; ``dlbench bench`` divides a
cell's achieved GFLOP/s by the newest matching peak from the same machine.

* CPU, fp32: numpy's ``matmul`` (the BLAS numpy ships, OpenBLAS in the
  wheels) on float32 matrices, threads = physical cores;
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
        import numpy as np

        n = int(payload.get("n") or CPU_N)
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
        return {"results": [{"precision": "fp32", "n": n, "library": f"numpy {np.__version__}"
                             + (f" ({blas})" if blas else ""), **res}]}
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
    from harness import __version__
    from harness.context import cell_key, command_line, new_run_id, now_iso
    from harness.fingerprint import fingerprint
    from harness.frameworks import distribution_version
    from harness.launcher import run_cell
    from harness.results import ResultStore
    from harness.threads import ThreadConfig, in_force

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
    records = []
    for device in devices:
        started = now_iso()
        outcome = run_cell("peak", {"device": device, "seconds": seconds}, env=env,
                           timeout=timeout)
        results = outcome.result.get("results", []) if outcome.ok else [{"precision": "fp32"}]
        for res in results:
            identity = {"device": device, "precision": res["precision"],
                        "machine_id": fp["machine_id"], "started_at": started}
            record = {
                "run_id": run_id, "kind": "peak", "cell_key": cell_key("peak", identity),
                "status": "ok" if outcome.ok else "failed", "error": outcome.error,
                "started_at": started, "duration_s": outcome.wall_s, "device": device,
                "precision": res["precision"], "intra_op_threads": threads.intra_op,
                "inter_op_threads": threads.inter_op, "machine_id": fp["machine_id"],
                "dlbench_version": __version__, "git_commit": fp["git_commit"],
                "command_line": command_line(),
                "context": {"thread_environment": in_force(env), "library": res.get("library"),
                            "n": res.get("n"), "device_name": res.get("device_name")},
                "metrics": {k: res.get(k) for k in ("gflops", "median_gflops", "best_s",
                                                    "repetitions", "n")},
            }
            record["id"] = store.add(record, fp)
            records.append(record)
    return records
