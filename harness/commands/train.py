"""Train a model briefly in one or more native frameworks and record the timings.

A zoo model trains in each framework it has; a model of your own (a file, or
``--model-from`` code) trains in its own framework with the loss
``--objective`` names, on data in the shape of its signature.

Each framework runs in its own process on data generated before the clock
starts; warm-up steps are timed but reported apart.  The checkpoint and a
manifest.json land in OUT/MODEL/FRAMEWORK/ (FRAMEWORK-Ndev/ for --devices N,
FRAMEWORK-with-PACKAGE-VERSION/ for --with), one record per cell in the results
database.  Exit status: 0 all ran, 1 a run failed, 2 bad input.
"""

from __future__ import annotations

HELP = "train a model briefly in native frameworks and record training throughput"


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.training.request import SCALING, TrainRequest

    p.add_argument_group(
        SCALING,
        "each cell runs on the framework's own launcher (torchrun, msrun, TF_CONFIG workers); "
        "the table adds Speedup = T_N/(N*T_1)",
    )
    flags.add_arguments(p, TrainRequest)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def run(args) -> int:
    from dlbench.core import flags
    from dlbench.harness.output.progress import with_progress
    from dlbench.harness.output.tables import scaling_table, train_table
    from dlbench.harness.training.request import TrainRequest
    from dlbench.harness.training.runner import train

    req = flags.from_args(TrainRequest, args)
    what = req.model or req.model_from
    records = with_progress(args, f"train {what}", "train", lambda say: train(req, progress=say))
    print(scaling_table(records) if req.devices else train_table(records))
    return 0 if all(r["status"] == "ok" for r in records) else 1
