"""GEMM, convolution and memory-stream micro-benchmarks on every engine.

Each op x engine x precision x threads (x --with environment) is one cell in
its own process, timed like a bench cell (warm-up excluded and reported, then
at least --min-iterations and --min-duration), its result checked against
numpy, and stored as a ``micro`` record.  GEMM and convolution report GFLOP/s
and their share of this machine's GEMM peak (``dlbench env --peak``); memory
streams report GB/s and their share of the best stream measured.  Exit
status: 0 every cell ran, 1 a cell failed, 2 bad input.
"""

from __future__ import annotations

HELP = "micro-benchmarks: GEMM, convolution and memory bandwidth across engines"


def add_arguments(p) -> None:
    from dlbench.harness.micro.ops import DEFAULTS, KINDS

    p.add_argument("op", choices=KINDS, help="gemm, conv or memory")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        help="GEMM MxKxN (or N), convolution NxCxHxW:KkR[sS], memory MiB per array; "
        "repeat or comma-separate (defaults: "
        + "; ".join(f"{k} {','.join(v)}" for k, v in DEFAULTS.items())
        + ")",
    )
    add_common_arguments(p)


def add_common_arguments(p, layer: bool = False) -> None:
    """What ``micro`` and ``layer`` share: engines, precisions, axes, measurement, output."""
    from dlbench.harness.cli.config import field_default
    from dlbench.harness.commands import add_with_argument
    from dlbench.harness.micro.engines import ENGINES, LAYER_ENGINES, PRECISIONS
    from dlbench.harness.micro.sweep import MicroRequest

    rule = field_default(MicroRequest, "rule")
    if layer:
        p.add_argument(
            "--shape",
            action="append",
            default=[],
            help="the layer's shape (see README 'Layer benchmarks', e.g. conv "
            "16x64x56x56:64k3, dense 32x2048x1000, lstm 32x50x128:256); repeat",
        )
    p.add_argument(
        "--model", default=None, help="take the shapes from a zoo network's layers instead (e.g. resnet50)"
    )
    p.add_argument(
        "--batch",
        type=int,
        default=field_default(MicroRequest, "batch"),
        help="batch of --model's shapes (default %(default)s)",
    )
    p.add_argument(
        "--engine",
        "-e",
        action="append",
        default=None,
        help=f"{', '.join(LAYER_ENGINES if layer else ENGINES)}; repeat or "
        f"comma-separate, the first the reference (default: every installed one)",
    )
    p.add_argument(
        "--precision",
        action="append",
        default=None,
        help=f"{', '.join(PRECISIONS)}; repeat or comma-separate (default fp32)",
    )
    p.add_argument(
        "--device", default=field_default(MicroRequest, "device"), help="cpu or cuda (default %(default)s)"
    )
    p.add_argument(
        "--threads", default=None, help="intra-op threads, comma-separated to sweep (default: physical cores)"
    )
    p.add_argument(
        "--allocator",
        default=field_default(MicroRequest, "allocator"),
        help="memory allocator of each cell (default %(default)s)",
    )
    add_with_argument(p)
    g = p.add_argument_group("measurement")
    g.add_argument("--warmup", type=int, default=rule.warmup, help="default %(default)s")
    g.add_argument("--min-iterations", type=int, default=rule.min_iterations, help="default %(default)s")
    g.add_argument(
        "--min-duration",
        type=float,
        default=rule.min_duration_s,
        help="seconds measured at least (default %(default)g)",
    )
    g.add_argument(
        "--iterations", type=int, default=None, help="measure exactly this many iterations instead"
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the operands (default 0)")
    o = p.add_argument_group("output")
    o.add_argument(
        "--timeout",
        type=float,
        default=field_default(MicroRequest, "timeout"),
        help="seconds per cell (default %(default)s)",
    )
    o.add_argument(
        "--resume", action="store_true", help="skip cells already in the database with the same identity"
    )
    o.add_argument(
        "--db", default=None, help="results database (default $DLBENCH_DB or results/dlbench.sqlite)"
    )
    o.add_argument("--json", dest="json_path", default=None, help="also write one record per cell here")
    o.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def request_from(args, argv=None, kind: str | None = None):
    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.bench.request import split
    from dlbench.harness.micro.sweep import MicroRequest

    return MicroRequest(
        kind=kind or args.op,
        shapes=split(args.shape),
        model=args.model,
        batch=args.batch,
        engines=split(args.engine) if args.engine else None,
        precisions=split(args.precision) or ["fp32"],
        device=args.device,
        threads=split([args.threads], int) if args.threads else None,
        allocator=args.allocator,
        with_specs=list(args.with_specs),
        rule=StopRule(
            warmup=args.warmup,
            max_warmup=max(100, args.warmup),
            min_iterations=args.min_iterations,
            min_duration_s=args.min_duration,
            iterations=args.iterations,
        ),
        seed=args.seed,
        timeout=args.timeout,
        resume=args.resume,
        db=args.db,
        json_path=args.json_path,
        argv=argv,
    )


def run(args) -> int:
    return run_request(request_from(args), args.quiet)


def run_request(req, quiet: bool) -> int:
    from dlbench.harness.micro.sweep import run_micro
    from dlbench.harness.micro.table import micro_table

    records = run_micro(req, show_progress=not quiet)
    print(micro_table(records))
    return 0 if all(r["status"] != "failed" for r in records) else 1
