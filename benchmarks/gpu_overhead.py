"""Does the harness cost GPU throughput?  ``dlbench bench --device cuda`` against a plain loop.

For one backend and mode, alternates ``--rounds`` times a plain hand-written
loop (benchmarks/plain_bench_pytorch.py or plain_bench_onnxruntime.py, a fresh
process timing every batch size) and one ``dlbench bench`` request over the
same batch sizes (its Python API; each cell a fresh process), with the same
model, precision, inputs, warm-up and measured iterations.  Reports per batch
the ratio of the medians (target: at least 0.97 of the plain loop, the GPU
issue's bar).  Modes:

* pytorch: ``eager``, ``compile`` (torch.compile default mode), ``graph``
  (CUDA graph replay, ``--cuda-graph``);
* onnxruntime (onnxruntime-gpu): ``iobinding`` (dlbench's GPU default) and
  ``host`` (``--io-binding off``: ``session.run`` from host memory).

    python benchmarks/gpu_overhead.py --backend pytorch --mode graph --batch-sizes 1,8,32,128
    python benchmarks/gpu_overhead.py --backend onnxruntime --mode iobinding --batch-sizes 1,32

Exit status 1 when a batch misses the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dlbench.harness.backends import get_backend
from dlbench.harness.bench.execute import run_bench
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cells.threads import usable_cores
from dlbench.harness.output.tables import markdown

RATIO_TARGET = 0.97
MODES = {
    "pytorch": {"eager": ({}, []), "compile": ({"compile": "default"}, ["--compile", "default"])}
    | {"graph": ({"cuda_graph": "on"}, ["--cuda-graph"])},
    "onnxruntime": {
        "iobinding": ({"io_binding": "on"}, ["--io-binding", "on"]),
        "host": ({"io_binding": "off"}, ["--io-binding", "off"]),
    },
}


def plain(a, model: str, extra: list[str]) -> dict[int, float]:
    args = [model] if a.backend == "onnxruntime" else ["--model", model]
    # The threads a dlbench cell starts with by default (physical cores), not the plain
    # loop's own default of 1: the H100 run of 2026-11-26 compared 1 thread with 16.
    args += ["--threads", str(usable_cores())]
    if a.backend == "pytorch":
        args += ["--precision", a.precision]
    # The math variables a dlbench cell of this backend starts with (none for ONNX Runtime's
    # CUDA provider: its use_tf32 switch is set instead).
    backend = get_backend(a.backend)
    env = dict(os.environ, **backend.math_environment("cuda", a.precision, {"provider": "cuda"}))
    out = subprocess.run(
        [sys.executable, str(HERE / f"plain_bench_{a.backend}.py"), *args, "--device", "cuda"]
        + ["--batch-sizes", a.batch_sizes, "--warmup", str(a.warmup), "--iterations", str(a.iterations)]
        + extra,
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode:
        raise SystemExit(f"plain loop failed:\n{out.stderr[-3000:]}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {r["batch_size"]: r["throughput_sps"] for r in rows}


def harness(a, model: str, options: dict, tmp: Path) -> dict[int, float]:
    req = BenchRequest(
        artifacts=[model],
        backends=[a.backend],
        devices=["cuda"],
        precisions=[a.precision],
        batch_sizes=[int(b) for b in a.batch_sizes.split(",")],
        rule=StopRule(warmup=a.warmup, max_warmup=a.warmup, iterations=a.iterations),
        iqr_threshold=1e9,
        seed=0,
        options=options,
        db=str(tmp / "bench.sqlite"),
    )
    got = {}
    for rec in run_bench(req, show_progress=False):
        if rec["status"] == "failed":
            raise SystemExit(f"harness cell failed: {rec['error']}")
        got[rec["batch_size"]] = rec["throughput_sps"]
    return got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=tuple(MODES), default="pytorch")
    p.add_argument("--mode", default=None, help="pytorch: eager|compile|graph; onnxruntime: iobinding|host")
    p.add_argument("--model", default="resnet50", help="zoo name (pytorch) or ONNX file (onnxruntime)")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--batch-sizes", default="1,8,32,128")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    mode = a.mode or next(iter(MODES[a.backend]))
    options, extra = MODES[a.backend][mode]
    pl: dict[int, list[float]] = {}
    hs: dict[int, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-overhead-") as tmp:
        for i in range(a.rounds):  # interleaved, so drift hits both alike
            for b, v in plain(a, a.model, extra).items():
                pl.setdefault(b, []).append(v)
            for b, v in harness(a, a.model, options, Path(tmp)).items():
                hs.setdefault(b, []).append(v)
            print(f"round {i + 1}: plain {pl}  dlbench {hs}", file=sys.stderr, flush=True)
    rows, ratios = [], {}
    for b in sorted(pl):
        ratios[b] = statistics.median(hs[b]) / statistics.median(pl[b])
        rows.append(
            [
                str(b),
                ", ".join(f"{x:.1f}" for x in pl[b]),
                ", ".join(f"{x:.1f}" for x in hs[b]),
                f"{ratios[b]:.3f}",
            ]
        )
    print(
        f"{a.model}, {a.backend} {mode} on cuda, {a.precision}, {a.warmup} warm-up + "
        f"{a.iterations} measured iterations, {a.rounds} interleaved rounds"
    )
    print(markdown(("batch", "plain (samples/s)", "dlbench bench (samples/s)", "ratio"), rows))
    ok = all(r >= RATIO_TARGET for r in ratios.values())
    print(f"target >= {RATIO_TARGET}: {'OK' if ok else 'MISSED'}")
    if a.json:
        Path(a.json).write_text(json.dumps({"plain": pl, "harness": hs, "ratios": ratios}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
