"""This machine's measured GEMM peak, so a benchmark can say what share of it it reached.

``dlbench env --peak`` runs a square matrix multiply on each device, in its
own process with the usual thread rules, and stores one ``peak`` record per
device, precision and CPU thread count (``--peak-threads``; default physical
cores) in the results database; ``dlbench bench`` divides a cell's achieved
GFLOP/s by the best peak from the same machine, device, precision and thread
count.  Once a machine has a peak, a bench at a thread count without one
measures it first (``ensure_peaks``), so every share is against its own
thread count.

* CPU, fp32: the best of ``dlbench micro gemm``'s numpy kernel (the BLAS
  numpy ships, OpenBLAS in the wheels), its ONNX Runtime kernel (MLAS) and
  its PyTorch one (oneDNN/MKL) when they are installed, on float32 matrices,
  threads = physical cores; bf16 and int8 the same way with the engines that
  have those kernels (PyTorch's bf16 matmul, PyTorch's ``_int_mm`` and ONNX
  Runtime's ``MatMulInteger``), each its own ceiling.  The
  best library counts: a peak below what a real network's convolutions reach
  (ONNX Runtime's ResNet-50 convolutions run at about 1.9x OpenBLAS's SGEMM
  on this project's Zen 5 machine) would put cells above 100 % of "peak";
* CUDA: ``torch.matmul`` in fp32 (IEEE: TF32 off, ``harness.cells.mathmode``), fp16
  and bf16, and tf32 on a GPU that has it, when PyTorch with CUDA is installed.
  Each peak record keeps the math mode its GEMM ran in.

The figure is the best of the timed repetitions (peak, not typical): a GEMM
large enough to be compute-bound, timed for about ``seconds`` per precision.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dlbench.harness.bench.peak_share import PEAK_PRECISION, missing_thread_counts
from dlbench.harness.cells import mathmode
from dlbench.harness.cells.payload import Payload

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
    return {
        "gflops": flops / best / 1e9,
        "best_s": best,
        "repetitions": len(times),
        "median_gflops": flops / sorted(times)[len(times) // 2] / 1e9,
    }


@dataclass
class PeakPayload(Payload):
    """The ``peak`` cell's message: which device's GEMM peak, measured for how long."""

    WHAT = "peak"
    VERSION = 1

    device: str
    seconds: float = 2.0
    threads: int = 0  # 0: the library's own count
    n: int | None = None  # the GEMM's size (None: the device's default)
    precisions: list[str] | None = None  # None: every precision the device has
    device_id: int = 0


def child(message: dict[str, Any]) -> dict[str, Any]:
    payload = PeakPayload.from_json(message)
    device, seconds = payload.device, float(payload.seconds)
    if device == "cpu":
        n = int(payload.n or CPU_N)
        threads = int(payload.threads or 0)
        results = []
        for precision in payload.precisions or CPU_PRECISIONS:
            candidates = [
                c for c in (_micro_gemm(e, n, seconds, threads, precision) for e in CPU_ENGINES) if c
            ]
            if not candidates:
                continue
            best = max(candidates, key=lambda c: c["gflops"])
            results.append(
                {
                    "precision": precision,
                    "n": n,
                    **best,
                    "candidates": [{k: c[k] for k in ("library", "gflops")} for c in candidates],
                    "math_mode": {"gemm": CPU_MATH[precision], "env": mathmode.env_in_force()},
                }
            )
        return {"results": results}
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch sees no CUDA device")
        n = int(payload.n or GPU_N)
        dev = torch.device("cuda", payload.device_id)
        results = []
        kinds = [("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)]
        if mathmode.tf32_reason("cuda", dev.index or 0) is None:
            kinds.append(("tf32", torch.float32))  # float32 in TensorFloat-32 math
        for precision, dtype in kinds:
            math = mathmode.torch_math(torch, "cuda", precision)  # fp32: IEEE
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            res = _time_best(
                lambda a=a, b=b: torch.matmul(a, b), lambda: torch.cuda.synchronize(dev), 2.0 * n**3, seconds
            )
            results.append(
                {
                    "precision": precision,
                    "n": n,
                    "library": f"torch {torch.__version__} (cuBLAS)",
                    "device_name": torch.cuda.get_device_name(dev),
                    "math_mode": math,
                    **res,
                }
            )
        return {"results": results}
    raise RuntimeError(f"no GEMM micro-benchmark for device {device!r}")


# The CPU peak is the best of these ``dlbench micro`` engines' GEMM kernels: the ones
# that share a process (TensorFlow and MindSpore cannot, and would need one each).
CPU_ENGINES = ("numpy", "onnxruntime", "pytorch")
# One CPU ceiling per precision a micro engine has a GEMM for: a bf16 or int8 cell divided
# by the fp32 peak would read far above 100 % on a CPU with bf16 or VNNI instructions.
CPU_PRECISIONS = ("fp32", "bf16", "int8")
CPU_MATH = {
    "fp32": "IEEE float32 (BLAS, MLAS, oneDNN)",
    "bf16": "bfloat16 inputs, float32 accumulation",
    "int8": "int8 inputs, int32 accumulation",
}


def _micro_gemm(
    engine: str, n: int, seconds: float, threads: int, precision: str = "fp32"
) -> dict[str, Any] | None:
    """One engine's square GEMM, built as ``dlbench micro gemm`` builds it (the same
    kernel, so a peak and a micro cell are one measurement), or None when the engine is
    not installed or has no kernel for ``precision``.  Only fp32's failure is the cell's:
    a missing bf16 or int8 kernel (a CPU without the instructions) leaves that ceiling
    out rather than losing the fp32 one."""
    from dlbench.harness.cells.threads import usable_cores
    from dlbench.harness.machine.frameworks import is_installed
    from dlbench.harness.micro import engines
    from dlbench.harness.micro.ops import Op

    module = engines.module(engine)
    if not is_installed(module.FRAMEWORK) or precision not in module.SUPPORTS["gemm"]:
        return None
    from dlbench.harness.cells.cpuusage import CpuWindow

    op = Op("gemm", (n, n, n))
    try:
        inputs = engines.make_inputs(op, precision)
        kernel = module.build(op, precision, "cpu", inputs, threads or usable_cores())
        with CpuWindow() as window:  # what others took of our CPUs while it measured
            res = _time_best(kernel.step, lambda: None, op.flops(), seconds)
        res["contended_share"] = window.report(1)["contended_share"]
        engines.check(op, precision, inputs, kernel)
    except Exception:
        if precision == "fp32":
            raise
        return None
    return {"library": kernel.library, **res}


def peak_thread_counts(threads: list[int] | None = None) -> list[int]:
    """CPU thread counts a peak is measured at: the ones asked for, else physical cores."""
    from dlbench.harness.cells.threads import usable_cores

    return sorted(set(threads or [usable_cores()]))


def measure_peaks(
    db: str | None = None,
    seconds: float = 2.0,
    timeout: float | None = 600,
    threads: list[int] | None = None,
    devices: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Run the GEMM cells for every device here (the CPU at each of ``threads``, default
    physical cores); store and return one record per result."""
    from dlbench.harness.machine.fingerprint import fingerprint
    from dlbench.harness.machine.frameworks import distribution_version
    from dlbench.harness.store.context import new_run_id
    from dlbench.harness.store.results import ResultStore

    store = ResultStore(db)
    store.check_writable()
    fp = fingerprint()
    run_id = new_run_id()
    if devices is None:
        devices = ["cpu"]
        torch_version = distribution_version("torch") or ""
        if fp["gpus"] and torch_version and "+cpu" not in torch_version:
            devices.append("cuda")
    counts = peak_thread_counts(threads)
    out = []
    for device in devices:
        # A GPU's peak does not depend on host threads: measured once.
        for t in counts if device == "cpu" else counts[-1:]:
            out += _measure_one(store, fp, run_id, device, t, seconds, timeout)
    return out


def _measure_one(
    store, fp: dict[str, Any], run_id: str, device: str, intra_op: int, seconds: float, timeout: float | None
) -> list[dict[str, Any]]:
    import os

    from dlbench.harness.cells.cellenv import cell_environment
    from dlbench.harness.cells.launcher import run_cell
    from dlbench.harness.cells.threads import ThreadConfig
    from dlbench.harness.store import records
    from dlbench.harness.store.context import now_iso

    threads = ThreadConfig.default(intra_op)
    env = cell_environment(threads)
    started = now_iso()
    # Other work on the machine while the GEMM runs is what makes a peak read low: kept.
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    message = PeakPayload(device, seconds, threads.intra_op).to_json()
    outcome = run_cell("peak", message, env=env, timeout=timeout)
    results = outcome.result.get("results", []) if outcome.ok else [{"precision": "fp32"}]
    out = []
    for res in results:
        identity = {
            "device": device,
            "precision": res["precision"],
            "threads": intra_op,
            "machine_id": fp["machine_id"],
            "started_at": started,
        }
        record = records.new_record(
            "peak",
            run_id=run_id,
            identity=identity,
            started=started,
            argv=None,
            device=device,
            fp=fp,
            env=env,
            status="ok" if outcome.ok else "failed",
            error=outcome.error,
            duration_s=outcome.wall_s,
            precision=res["precision"],
            intra_op_threads=threads.intra_op,
            inter_op_threads=threads.inter_op,
            metrics={
                **{
                    k: res.get(k)
                    for k in (
                        "gflops",
                        "median_gflops",
                        "best_s",
                        "repetitions",
                        "n",
                        "candidates",
                        "contended_share",
                    )
                },
                "seconds": seconds,
            },
        )
        record["context"].update(
            {
                "library": res.get("library"),
                "n": res.get("n"),
                "device_name": res.get("device_name"),
                "math_mode": res.get("math_mode"),
                "load_average_1m": load,
            }
        )
        record["id"] = store.add(record, fp)
        out.append(record)
    return out


def ensure_peaks(store, fp: dict[str, Any], cells, timeout: float | None = 600) -> list[str]:
    """Measure the CPU peak at the thread counts of ``cells`` that have none yet, when this
    machine already has a peak (the user asked for peaks once); notes for the progress."""
    wanted = {c.intra_op for c in cells if c.device == "cpu" and PEAK_PRECISION.get(c.precision) == "fp32"}
    missing, seconds = missing_thread_counts(store, fp["machine_id"], wanted)
    if not missing:
        return []
    from dlbench.harness.store.context import new_run_id

    run_id = new_run_id()
    notes = []
    for t in missing:
        recs = _measure_one(store, fp, run_id, "cpu", t, seconds, timeout)
        ok = [r for r in recs if r["status"] == "ok"]
        notes.append(
            f"note: measured the CPU GEMM peak at {t} thread(s) for % of peak: "
            + (f"{ok[0]['metrics']['gflops']:.1f} GFLOP/s" if ok else f"FAILED: {recs[0]['error']}")
        )
    return notes
