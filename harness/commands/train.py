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
    from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR  # TrainRequest's, without its imports
    from dlbench.harness.commands import add_user_model_arguments, add_with_argument
    from dlbench.harness.data.formats import help_text as data_help
    from dlbench.harness.training.objectives import OBJECTIVES, user_objectives

    p.add_argument(
        "model",
        nargs="?",
        default=None,
        help="zoo model name (see 'dlbench models'), or a model file of your own "
        "(TorchScript, .keras, Keras .h5)",
    )
    p.add_argument(
        "--framework",
        "-f",
        action="append",
        default=None,
        help="pytorch, tensorflow or mindspore; repeat or comma-separate for several "
        "(default: every framework the model has)",
    )
    p.add_argument("--batch-size", type=int, default=None, help="default: the model's own")
    p.add_argument("--steps", type=int, default=10, help="measured steps (default 10)")
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=2,
        help="steps run before the clock starts, reported apart (default 2)",
    )
    p.add_argument("--device", default="cpu", help="cpu, gpu or ascend (default cpu)")
    p.add_argument(
        "--precision",
        default="fp32",
        help="fp32 (IEEE float32 on every device), tf32 (NVIDIA GPU of compute "
        "capability 8.0+) or amp (default fp32)",
    )
    p.add_argument("--threads", type=int, default=None, help="intra-op threads (default: physical cores)")
    p.add_argument("--inter-op-threads", type=int, default=None, help="default 1")
    p.add_argument(
        "--allocator",
        default=None,
        metavar="NAME",
        help="memory allocator of each run's process: system, tuned (glibc keeping "
        f"freed memory), jemalloc or tcmalloc (default {DEFAULT_ALLOCATOR})",
    )
    add_with_argument(p, "training runs")
    p.add_argument("--data", default="synthetic", metavar="DATA", help=data_help())
    p.add_argument(
        "--eval",
        action="store_true",
        help="after training, held-out loss and top-1 accuracy in inference mode "
        "(the data set's test/val split; synthetic: a fresh seeded split)",
    )
    p.add_argument(
        "--eval-samples",
        type=int,
        default=None,
        help="evaluate at most this many held-out samples (default: the whole split; synthetic: 256)",
    )
    add_user_model_arguments(p, "train")
    p.add_argument(
        "--int-range",
        action="append",
        default=[],
        metavar="NAME=LOW:HIGH",
        help="a user's model's integer input drawn from [LOW, HIGH)",
    )
    p.add_argument(
        "--objective",
        default=None,
        choices=user_objectives(),
        help="what a user's model's output is, for its loss: "
        + "; ".join(f"{o.name}: {o.description}" for o in OBJECTIVES.all() if o.user)
        + "; required for a model of your own",
    )
    p.add_argument(
        "--loss-output",
        default=None,
        metavar="NAME",
        help="the output the loss is on (default: the model's first)",
    )
    g = p.add_argument_group(
        "data-parallel scaling",
        "each cell runs on the framework's own launcher (torchrun, "
        "msrun, TF_CONFIG workers); the table adds Speedup = T_N/(N*T_1)",
    )
    g.add_argument(
        "--devices",
        action="append",
        default=None,
        metavar="N[,N...]",
        help="devices per node, a sweep axis (e.g. 1,2,4); on a CPU a device is "
        "one process pinned to its share of the cores",
    )
    g.add_argument(
        "--scaling",
        default="weak",
        choices=("weak", "strong"),
        help="weak (default): --batch-size per device, the global batch grows; "
        "strong: --batch-size is the global batch, split over the devices",
    )
    g.add_argument("--nodes", type=int, default=1, help="nodes taking part (default 1)")
    g.add_argument("--node-rank", type=int, default=0, help="this node's index (default 0)")
    g.add_argument(
        "--master-addr",
        default="127.0.0.1",
        help="node 0's address, which every node names (default 127.0.0.1)",
    )
    g.add_argument(
        "--master-port",
        type=int,
        default=0,
        help="node 0's rendezvous port; required with --nodes > 1 (default: a free port per cell)",
    )
    g.add_argument(
        "--node-addrs",
        default=None,
        metavar="HOST,HOST",
        help="every node's address in node-rank order (TensorFlow on several "
        "nodes: TF_CONFIG names every worker)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--lr",
        type=float,
        default=None,
        help="SGD learning rate, momentum 0.9 (default: the model's own, 0.05 for "
        "the CNNs; see 'dlbench models')",
    )
    p.add_argument("--out", default="runs", help="checkpoints go to OUT/MODEL/FRAMEWORK/")
    p.add_argument(
        "--db", default=None, help="results database (default $DLBENCH_DB or results/dlbench.sqlite)"
    )
    p.add_argument("--json", dest="json_path", default=None, help="also write the records here")
    p.add_argument("--timeout", type=float, default=None, help="seconds per framework run")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def frameworks_from(values, default) -> list[str]:
    if not values:
        return list(default)
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return list(dict.fromkeys(names))


def run(args) -> int:
    from dlbench.harness.bench.input_args import parse_int_range
    from dlbench.harness.bench.request import split
    from dlbench.harness.commands import user_inputs
    from dlbench.harness.output.progress import with_progress
    from dlbench.harness.output.tables import scaling_table, train_table
    from dlbench.harness.training.runner import TrainRequest, train

    shapes, given = user_inputs(args)
    req = TrainRequest(
        model=args.model,
        frameworks=frameworks_from(args.framework, ()),
        model_from=args.model_from,
        weights=args.weights,
        shapes=shapes,
        inputs=given,
        int_ranges=dict(parse_int_range(r) for r in args.int_range),
        objective=args.objective,
        loss_output=args.loss_output,
        batch_size=args.batch_size,
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        device=args.device,
        precision=args.precision,
        threads=args.threads,
        inter_op_threads=args.inter_op_threads,
        data=args.data,
        eval=args.eval,
        eval_samples=args.eval_samples,
        seed=args.seed,
        learning_rate=args.lr,
        out=args.out,
        db=args.db,
        json_path=args.json_path,
        timeout=args.timeout,
        devices=split(args.devices, int) if args.devices else None,
        scaling=args.scaling,
        nodes=args.nodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        node_addrs=split([args.node_addrs or ""]),
        with_specs=args.with_specs,
        **({"allocator": args.allocator} if args.allocator is not None else {}),
    )
    what = args.model or args.model_from
    records = with_progress(args, f"train {what}", "train", lambda say: train(req, progress=say))
    print(scaling_table(records) if req.devices else train_table(records))
    return 0 if all(r["status"] == "ok" for r in records) else 1
