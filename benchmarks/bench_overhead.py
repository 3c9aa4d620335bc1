"""Does the harness cost inference throughput?  dlbench bench against a plain engine loop.

In one run:

1. exports ResNet-50 v1.5 (the zoo's PyTorch network, random weights, seed 0)
   to ONNX with a dynamic batch (opset 17, TorchScript exporter: the dynamo
   exporter needs onnxscript; IR version kept at or below 13, the most ONNX
   Runtime 1.31 reads), in a subprocess;
2. alternates, ``--rounds`` times, the plain hand-written loop of
   ``--backend`` (benchmarks/plain_bench_onnxruntime.py or
   plain_bench_openvino.py, a fresh process) and one ``dlbench bench`` cell
   (its Python API; the cell is a fresh process too) with the same session
   options or compile properties, batch, threads, inputs, warm-up and
   measured iterations, so drift on the machine hits both alike;
3. reports the ratio of the medians (target: the harness reaches at least
   0.99 of the plain loop) and the agreement of the harness's repeats of the
   same cell (target: median absolute deviation over median at most 3 %).

Exit status 1 when a target is missed.  The real run (quiet machine):

    .venv/bin/python benchmarks/bench_overhead.py --model resnet50 --batch-size 32 --rounds 5
    .venv/bin/python benchmarks/bench_overhead.py --backend openvino --model resnet50 \
        --batch-size 8 --threads 2 --rounds 5

A smoke run with tiny settings:

    .venv/bin/python benchmarks/bench_overhead.py --model resnet50-mini --batch-size 2 \
        --iterations 3 --warmup 1 --rounds 2
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

from dlbench.harness import stats
from dlbench.harness.bench.execute import run_bench
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cells.allocator import ALLOCATORS, DEFAULT_ALLOCATOR
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.threads import ThreadConfig, physical_cores
from dlbench.harness.output.tables import markdown

RATIO_TARGET = 0.99  # the bar: the harness costs at most 1 % of the plain loop
SPREAD_TARGET = 0.03
MAX_IR_VERSION = 13  # ONNX Runtime 1.31 refuses 14, onnx 1.23's default
PLAIN = {"onnxruntime": "Plain ORT loop", "openvino": "Plain OpenVINO loop"}


def export(model: str, path: Path) -> None:
    """Runs in its own process (``--export``): torch stays out of the measuring processes."""
    import onnx
    import torch

    from dlbench.models.registry import get_model

    spec = get_model(model)
    net = spec.build("pytorch", seed=0).eval()
    sample = torch.zeros(1, *spec.inputs[0].shape)
    torch.onnx.export(
        net,
        sample,
        str(path),
        input_names=[spec.inputs[0].name],
        output_names=["logits"],
        dynamic_axes={spec.inputs[0].name: {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    m = onnx.load(str(path))
    if m.ir_version > MAX_IR_VERSION:
        m.ir_version = MAX_IR_VERSION
        onnx.save(m, str(path))


def plain(path: Path, a, env: dict[str, str]) -> float:
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / f"plain_bench_{a.backend}.py"),
            str(path),
            "--batch-size",
            str(a.batch_size),
            "--threads",
            str(a.threads),
            "--inter-op-threads",
            "1",
            "--warmup",
            str(a.warmup),
            "--iterations",
            str(a.iterations),
            "--seed",
            "0",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["throughput_sps"]


def harness(path: Path, a, tmp: Path) -> float:
    req = BenchRequest(
        artifacts=[str(path)],
        backends=[a.backend],
        batch_sizes=[a.batch_size],
        threads=[a.threads],
        inter_op_threads=1,
        allocator=a.allocator,
        rule=StopRule(warmup=a.warmup, max_warmup=a.warmup, iterations=a.iterations),
        iqr_threshold=1e9,
        seed=0,
        db=str(tmp / "bench.sqlite"),
    )
    [rec] = run_bench(req, show_progress=False)
    if rec["status"] == "failed":
        raise SystemExit(f"harness cell failed: {rec['error']}")
    return rec["throughput_sps"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=tuple(PLAIN), default="onnxruntime")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=physical_cores())
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--onnx", default=None, help="use this ONNX file instead of exporting")
    p.add_argument(
        "--allocator",
        choices=ALLOCATORS,
        default=DEFAULT_ALLOCATOR,
        help="the allocator of both sides' processes",
    )
    p.add_argument("--json", default=None)
    p.add_argument("--export", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.export:
        export(a.model, Path(a.export))
        return 0
    env = cell_environment(ThreadConfig(a.threads, 1), a.allocator)  # the cell's own
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        tmp = Path(tmp)
        path = Path(a.onnx) if a.onnx else tmp / f"{a.model}.onnx"
        if not a.onnx:
            subprocess.run(
                [sys.executable, __file__, "--model", a.model, "--export", str(path)],
                check=True,
                env=dict(os.environ),
            )
        pl, hs = [], []
        for i in range(a.rounds):  # interleaved, so drift hits both alike
            pl.append(plain(path, a, env))
            hs.append(harness(path, a, tmp))
            print(
                f"round {i + 1}: plain {pl[-1]:.2f}  dlbench bench {hs[-1]:.2f} samples/s",
                file=sys.stderr,
                flush=True,
            )
    ratio = statistics.median(hs) / statistics.median(pl)
    spread = stats.relative_mad(hs)
    ok = ratio >= RATIO_TARGET and spread <= SPREAD_TARGET
    print(
        f"{a.model} ONNX, {a.backend} CPU, batch {a.batch_size}, {a.threads} threads, "
        f"{a.warmup} warm-up + {a.iterations} measured iterations, {a.rounds} interleaved rounds"
    )
    print(
        markdown(
            ("", PLAIN[a.backend], "dlbench bench"),
            [
                [
                    "throughput per round (samples/s)",
                    ", ".join(f"{x:.2f}" for x in pl),
                    ", ".join(f"{x:.2f}" for x in hs),
                ],
                ["median", f"{statistics.median(pl):.2f}", f"{statistics.median(hs):.2f}"],
                ["MAD / median", f"{stats.relative_mad(pl):.2%}", f"{spread:.2%}"],
            ],
        )
    )
    print(
        f"\nratio dlbench / plain: {ratio:.3f} (target >= {RATIO_TARGET}); repeats of the "
        f"harness cell agree within {spread:.2%} MAD/median (target <= {SPREAD_TARGET:.0%}): "
        f"{'OK' if ok else 'MISSED'}"
    )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"plain_sps": pl, "harness_sps": hs, "ratio": ratio, "harness_mad_over_median": spread},
                indent=2,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
