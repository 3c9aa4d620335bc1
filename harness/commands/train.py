"""Train a zoo model briefly in one or more native frameworks and record the timings.

Each framework runs in its own process on data generated before the clock
starts; warm-up steps are timed but reported apart.  The checkpoint and a
manifest.json land in OUT/MODEL/FRAMEWORK/, one record per framework in the
results database.  Exit status: 0 all ran, 1 a run failed, 2 bad input.
"""
from __future__ import annotations

HELP = "train a model briefly in native frameworks and record training throughput"


def add_arguments(p) -> None:
    p.add_argument("model", help="zoo model name (see 'dlbench models')")
    p.add_argument("--framework", "-f", action="append", default=None,
                   help="pytorch, tensorflow or mindspore; repeat or comma-separate for several "
                        "(default: every framework the model has)")
    p.add_argument("--batch-size", type=int, default=None, help="default: the model's own")
    p.add_argument("--steps", type=int, default=10, help="measured steps (default 10)")
    p.add_argument("--warmup-steps", type=int, default=2,
                   help="steps run before the clock starts, reported apart (default 2)")
    p.add_argument("--device", default="cpu", help="cpu, gpu or ascend (default cpu)")
    p.add_argument("--precision", default="fp32", help="fp32 or amp (default fp32)")
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads (default: physical cores)")
    p.add_argument("--inter-op-threads", type=int, default=None, help="default 1")
    p.add_argument("--data", default="synthetic",
                   help="'synthetic' (default) or an .npz file with arrays x (N,C,H,W) and y (N,)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (momentum 0.9)")
    p.add_argument("--out", default="runs", help="checkpoints go to OUT/MODEL/FRAMEWORK/")
    p.add_argument("--db", default=None, help="results database (default $DLBENCH_DB or "
                                              "results/dlbench.sqlite)")
    p.add_argument("--json", dest="json_path", default=None, help="also write the records here")
    p.add_argument("--timeout", type=float, default=None, help="seconds per framework run")


def frameworks_from(values, default) -> list[str]:
    if not values:
        return list(default)
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return list(dict.fromkeys(names))


def run(args) -> int:
    from harness.tables import train_table
    from harness.training.runner import TrainRequest, train
    from models.registry import get_model

    spec = get_model(args.model)
    req = TrainRequest(
        model=spec.name, frameworks=frameworks_from(args.framework, spec.frameworks),
        batch_size=args.batch_size, steps=args.steps, warmup_steps=args.warmup_steps,
        device=args.device, precision=args.precision, threads=args.threads,
        inter_op_threads=args.inter_op_threads, data=args.data, seed=args.seed,
        learning_rate=args.lr, out=args.out, db=args.db, json_path=args.json_path,
        timeout=args.timeout)
    records = train(req)
    print(train_table(records))
    return 0 if all(r["status"] == "ok" for r in records) else 1
