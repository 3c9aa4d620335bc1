"""Does ``dlbench tune`` find what an exhaustive grid finds, in a quarter of its time?

For each model and backend, every point of the space (``--space`` entries as tune takes
them) is measured as one bench cell of ``--window`` seconds: the grid, timed.  Then the
tune's search runs over the same space with a quarter of the grid's time as its budget.
The tune's pick is judged by the grid's own figure for that point, so both sides are one
measurement of each point: target, the pick within 3 % of the grid's best.  The default
point's grid figure says what the defaults lose here.

    .venv/bin/python benchmarks/tune_vs_grid.py a.onnx b.onnx --backends onnxruntime,openvino \
        --space threads=1,2 --space batch_size=1,16
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dlbench.harness.backends import get_backend
from dlbench.harness.bench.execute import run_bench
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.output.tables import markdown
from dlbench.harness.tune.request import space_entries
from dlbench.harness.tune.search import bench_request, run_search
from dlbench.harness.tune.space import SOURCE, declared, key, narrowed

TARGET = 0.97


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--backends", default="onnxruntime,openvino")
    ap.add_argument("--space", action="append", default=[])
    ap.add_argument("--window", type=float, default=1.0, help="seconds each grid cell measures")
    ap.add_argument("--share", type=float, default=0.25, help="the tune's budget, of the grid's time")
    a = ap.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp, "cells.sqlite"))
        for model in a.models:
            path = str(Path(model).resolve())
            for name in a.backends.split(","):
                space = narrowed(declared(get_backend(name), "cpu", [1], [], False), space_entries(a.space))
                grid: dict[tuple, float] = {}
                t0 = time.monotonic()
                for p in space.sample(space.size()):
                    rule = StopRule(warmup=3, min_iterations=5, min_duration_s=a.window)
                    r = run_bench(
                        bench_request(path, space, p, "cpu", rule, db, 0, None), show_progress=False
                    )[0]
                    grid[key(p)] = r["throughput_sps"] or 0.0
                grid_s = time.monotonic() - t0
                t0 = time.monotonic()
                search = run_search(
                    space, {SOURCE: path}, "cpu", ["throughput"], None, 3, grid_s * a.share, db
                )
                tune_s = time.monotonic() - t0
                pick = search.winner("throughput", None)
                best = max(grid.values())
                picked = grid[key(pick.point)] if pick else 0.0
                default = grid[key(space.default())]
                ok &= picked >= TARGET * best
                rows.append(
                    [
                        Path(model).name,
                        name,
                        space.size(),
                        f"{best:.4g}",
                        f"{grid_s:.0f} s",
                        f"{tune_s:.0f} s ({tune_s / grid_s:.0%})",
                        f"{picked:.4g} ({picked / best:.1%})",
                        f"{default:.4g} ({default / best - 1:+.0%})",
                        ", ".join(f"{k}={v}" for k, v in (pick.point if pick else {}).items()),
                    ]
                )
                print(rows[-1], file=sys.stderr, flush=True)
    headers = (
        "Model",
        "Backend",
        "Points",
        "Grid best (samples/s)",
        "Grid time",
        "Tune time",
        "Tune's pick, per the grid",
        "Default, per the grid",
        "Pick",
    )
    print(markdown(headers, rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
