"""The PyTorch-vs-MindSpore paper's Table 2 on this machine, at reduced step counts.

The paper (../shared/seeds/pytorch_vs_mindspore_paper.txt) trains GoogLeNet
(CIFAR-10, batch 128), an LSTM sentiment classifier (aclImdb, batch 64) and
BERT (batch 8 x 256) in both frameworks on a V100 and reports Time | Loss |
Acc.  Here each model trains a fixed, small number of steps with ``dlbench
train --eval`` in each framework (synthetic data: nothing is downloaded),
every run in its own process, into a private results database; then
``dlbench compare --framework pytorch --framework mindspore`` prints the
table from the database.  Absolute times are not comparable to a V100 and
accuracies after a few dozen steps mean little: the MindSpore / PyTorch
ratio is what the table is for.

    .venv/bin/python benchmarks/paper_table2.py
    .venv/bin/python benchmarks/paper_table2.py --models googlenet --steps 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# (zoo model, training batch): the paper's batches, BERT at the seed's BERT-base
# sequence length with a CPU-sized batch (the paper's 8 x 256 is BERT-large on a V100).
DEFAULTS = (("googlenet", 128), ("lstm", 64), ("bert-base", 8))


def dlbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dlbench.harness", *args], env=env, text=True, capture_output=True
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(m for m, _ in DEFAULTS))
    p.add_argument(
        "--frameworks",
        default="pytorch,mindspore",
        help="baseline first (default pytorch,mindspore); tensorflow works too",
    )
    p.add_argument("--steps", type=int, default=10, help="measured steps per run (default 10)")
    p.add_argument(
        "--batch-size",
        action="append",
        default=[],
        metavar="MODEL=N",
        help="training batch of a model (default: the paper's for its three, 32 for others)",
    )
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--eval-samples", type=int, default=256)
    p.add_argument("--db", default=None, help="keep the records here (default: a temp file)")
    a = p.parse_args()
    batches = dict(DEFAULTS)
    batches.update((m, int(n)) for m, _, n in (b.partition("=") for b in a.batch_size))
    baseline, *others = a.frameworks.split(",")
    with tempfile.TemporaryDirectory(prefix="dlbench-table2-") as tmp:
        env = dict(os.environ, DLBENCH_DB=a.db or str(Path(tmp, "table2.sqlite")))
        for model in a.models.split(","):
            for fw in a.frameworks.split(","):
                out = dlbench(
                    "train",
                    model,
                    "--framework",
                    fw,
                    "--steps",
                    str(a.steps),
                    "--warmup-steps",
                    str(a.warmup_steps),
                    "--batch-size",
                    str(batches.get(model, 32)),
                    "--eval",
                    "--eval-samples",
                    str(a.eval_samples),
                    "--out",
                    tmp,
                    env=env,
                )
                status = "ok" if out.returncode == 0 else f"exit {out.returncode}"
                print(f"{model} {fw}: {status}", file=sys.stderr, flush=True)
                if out.returncode == 2:
                    print(out.stderr, file=sys.stderr)
                    return 2
        rc = 0
        for other in others:
            out = dlbench(
                "compare", "--framework", baseline, "--framework", other, "--kind", "train", env=env
            )
            print(out.stdout)
            if out.returncode == 2:
                print(out.stderr, file=sys.stderr)
                rc = 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
