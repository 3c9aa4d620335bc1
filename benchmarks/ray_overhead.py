"""What does ``--executor ray`` cost a sweep?  The same cells locally and as Ray tasks.

Alternates, ``--rounds`` times, one sweep of ``--cells`` ONNX Runtime cells (batch sizes
1..N of a small MLP, one thread) with ``--executor local`` and the same sweep with
``--executor ray=ADDRESS``, through the Python API in this one process, so the Ray
connection is made once (its cost is reported apart) and drift on the machine hits
both alike.  For every cell after the first it takes the parent's time between two
stored records (the whole cell as the sweep sees it: payload, process, record, store)
less the cell process's own wall time; the difference of those medians is what Ray adds
per cell (target: at most 1 s).  It also pairs each cell's throughput across the two
executors (target: the median ratio ray / local within 0.95..1.05, the same number).

Exit status 1 when a target is missed.  Needs a running cluster whose nodes see this
machine's /tmp (one host), e.g.::

    ray start --head --port=6379 --num-cpus=2
    .venv/bin/python benchmarks/ray_overhead.py --address 127.0.0.1:6379 --cells 8 --rounds 3
    ray stop
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dlbench.harness.bench.execute import run_bench
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.executors import open_executor

ADDED_TARGET_S = 1.0
RATIO_BAND = (0.95, 1.05)


def mlp(path: Path, width: int) -> Path:
    """Two Gemm layers on a dynamic batch: long enough an iteration to time, one core."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), n)
        for n in ("W1", "W2")
    ]
    g = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "W1"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "W2"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])],
        inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def sweep(executor: str, model: Path, db: Path, a) -> list[tuple[float, float, float]]:
    """(parent's seconds for the cell, the cell process's own wall seconds, throughput)
    for every cell after the first."""
    marks: list[tuple[float, dict]] = []
    run_bench(
        BenchRequest(
            artifacts=[str(model)],
            backends=["onnxruntime"],
            threads=[1],
            batch_sizes=list(range(1, a.cells + 1)),
            iqr_threshold=100.0,
            rule=StopRule(warmup=5, max_warmup=50, min_iterations=20, min_duration_s=a.min_duration),
            db=str(db),
            executor=executor,
        ),
        show_progress=False,
        on_record=lambda r: marks.append((time.perf_counter(), r)),
    )
    return [
        (t - t0, r["metrics"]["cell_wall_s"], r["throughput_sps"])
        for (t0, _), (t, r) in zip(marks, marks[1:])
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--address", required=True, help="the Ray cluster, HOST:PORT")
    p.add_argument("--cells", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-duration", type=float, default=1.0)
    p.add_argument("--width", type=int, default=256)
    a = p.parse_args(argv)
    ray = f"ray={a.address}"
    t0 = time.perf_counter()
    open_executor(ray)
    connect_s = time.perf_counter() - t0
    got: dict[str, list[tuple[float, float, float]]] = {"local": [], ray: []}
    with tempfile.TemporaryDirectory(prefix="dlbench-rayoh-") as tmp:
        model = mlp(Path(tmp, "mlp.onnx"), a.width)
        for r in range(a.rounds):
            for name in ("local", ray):
                got[name] += sweep(name, model, Path(tmp, f"{r}-{name.split('=')[0]}.db"), a)
    per_cell = {k: statistics.median(t for t, _, _ in v) for k, v in got.items()}
    harness = {k: statistics.median(t - w for t, w, _ in v) for k, v in got.items()}
    ratios = [b[2] / x[2] for x, b in zip(got["local"], got[ray])]
    added = harness[ray] - harness["local"]
    ratio = statistics.median(ratios)
    print(
        f"cells per sweep {a.cells} (each measured >= {a.min_duration:g} s), rounds "
        f"{a.rounds}, cells compared {len(ratios)}; Ray connection {connect_s:.2f} s once"
    )
    print(f"{'executor':<24} {'cell as the sweep sees it':>26} {'of which outside the cell':>26}")
    for k in got:
        print(f"{k:<24} {per_cell[k]:>24.3f} s {harness[k]:>24.3f} s")
    print(f"added by Ray per cell: {added * 1000:.1f} ms (target <= {ADDED_TARGET_S:g} s)")
    print(
        f"throughput ray / local, per cell: median {ratio:.3f}, min {min(ratios):.3f}, "
        f"max {max(ratios):.3f} (target: median within {RATIO_BAND[0]}..{RATIO_BAND[1]})"
    )
    ok = added <= ADDED_TARGET_S and RATIO_BAND[0] <= ratio <= RATIO_BAND[1]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
