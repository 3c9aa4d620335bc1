"""Measure inference latency and throughput of a model on one or more backends.

ARTIFACT is an ONNX file, a TensorRT engine (.plan with its sidecar), a
MindIR file, a 'dlbench train' output (directory, manifest.json or
checkpoint) or a zoo model name (random weights).  Every combination of
backend, device, precision, batch size, threads and scenario is one cell,
run in its own process: a crash, an out-of-memory kill or a hang (--timeout)
is recorded as that cell's failure and the sweep goes on.  Each cell warms
up (a fixed count, then until the time per iteration stops falling), then
measures for at least --min-iterations AND --min-duration seconds (or
exactly --iterations).  Exit status: 0 every cell ran (ok or unstable), 1 a
cell failed, 2 bad input.
"""

from __future__ import annotations

HELP = "measure inference latency/throughput across backends, batch sizes and scenarios"


def add_arguments(p) -> None:
    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.bench.request import BenchRequest
    from dlbench.harness.cli.config import add_config_arguments, cli_form, field_default, show
    from dlbench.harness.commands import add_executor_arguments, add_user_model_arguments, add_with_argument

    def req(name):
        return cli_form(field_default(BenchRequest, name))

    def rule(name):
        return field_default(StopRule, name)

    p.add_argument(
        "artifacts",
        nargs="*",
        metavar="ARTIFACT",
        help="model.onnx, model.plan, model.mindir, a train output, a zoo name, or "
        "your own model: TorchScript, torch.export .pt2, .keras, Keras .h5, "
        "a SavedModel directory",
    )
    p.add_argument(
        "--backend",
        "-b",
        action="append",
        required=True,
        help="backend name(s), repeat or comma-separate; 'all' = every available "
        "backend that takes the artifacts (see 'dlbench backends')",
    )
    p.add_argument(
        "--device",
        action="append",
        default=None,
        help="cpu, cuda or ascend (default: the backend's first device)",
    )
    p.add_argument(
        "--device-id", type=int, default=req("device_id"), help="GPU / NPU index (default %(default)s)"
    )
    p.add_argument(
        "--precision",
        action="append",
        default=None,
        help="fp32, tf32, fp16, bf16, int8 (default: the artifact's own; fp32 for "
        "native); fp32 is IEEE float32, tf32 needs an NVIDIA GPU of compute "
        "capability 8.0+",
    )
    p.add_argument(
        "--batch-sizes", default=req("batch_sizes"), help="comma-separated, e.g. 1,8,32 (default %(default)s)"
    )
    p.add_argument(
        "--threads", default=None, help="intra-op threads, comma-separated to sweep (default: physical cores)"
    )
    p.add_argument("--inter-op-threads", type=int, default=None, help="default 1")
    p.add_argument(
        "--allocator",
        default=req("allocator"),
        metavar="NAME",
        help="memory allocator of each cell's process: system, tuned (glibc keeping "
        "freed memory), jemalloc or tcmalloc (default %(default)s)",
    )
    add_with_argument(p)
    p.add_argument(
        "--scenario",
        action="append",
        default=None,
        help=f"offline, single-stream, server; repeat or comma-separate (default "
        f"{show(field_default(BenchRequest, 'scenarios'))})",
    )
    g = p.add_argument_group("measurement")
    g.add_argument(
        "--warmup",
        type=int,
        default=rule("warmup"),
        help="warm-up iterations at least (more while the time still falls; default %(default)s)",
    )
    g.add_argument(
        "--max-warmup",
        type=int,
        default=rule("max_warmup"),
        help="warm-up iterations at most (default %(default)s)",
    )
    g.add_argument("--min-iterations", type=int, default=rule("min_iterations"), help="default %(default)s")
    g.add_argument(
        "--min-duration",
        type=float,
        default=rule("min_duration_s"),
        help="seconds measured at least (default %(default)g)",
    )
    g.add_argument(
        "--iterations",
        type=int,
        default=rule("iterations"),
        help="measure exactly this many iterations instead",
    )
    g.add_argument(
        "--repeats",
        type=int,
        default=req("repeats"),
        help="run each cell N times (each in a fresh process); report the median and "
        "the spread (default %(default)s)",
    )
    # --cv-threshold is the option's old name, kept so existing scripts and configs run;
    # the rule is on IQR / median now, which one slow iteration cannot trip.
    g.add_argument(
        "--iqr-threshold",
        "--cv-threshold",
        dest="iqr_threshold",
        type=float,
        default=req("iqr_threshold"),
        help="flag a cell unstable when the IQR / median of its per-iteration "
        "latencies exceeds this (default %(default)g; --cv-threshold is its "
        "old name)",
    )
    g.add_argument(
        "--repeat-spread-threshold",
        type=float,
        default=req("repeat_spread_threshold"),
        help="with --repeats: flag a cell unstable when (max - min) / median of the "
        "processes' throughputs exceeds this (default %(default)g)",
    )
    g.add_argument(
        "--seed", type=int, default=req("seed"), help="seed of the synthesized inputs (default %(default)s)"
    )
    i = p.add_argument_group("inputs (any ONNX model)")
    i.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=AxBxC",
        help="full shape of an input with dynamic dimensions (the batch dimension "
        "follows --batch-sizes); repeat per input",
    )
    i.add_argument(
        "--shapes",
        action="append",
        default=[],
        metavar="NAME:AxB,NAME2:C",
        help="the same in trtexec's form (split at each entry's last ':'; "
        "NAME:scalar for a 0-d input); may be combined with --shape",
    )
    i.add_argument(
        "--int-range",
        action="append",
        default=[],
        metavar="NAME=LOW:HIGH",
        help="integer input values drawn from [LOW, HIGH)",
    )
    i.add_argument(
        "--input",
        dest="inputs",
        action="append",
        default=[],
        metavar="NAME=VALUE|FILE.npy",
        help="set an input: one value for every element (e.g. sr=16000; checked "
        "against the model's dtype), or your own array (its dynamic "
        "dimensions set the input's; the batch takes its first rows, "
        "repeated if too few); repeat per input",
    )
    i.add_argument(
        "--model", default=req("model"), help="zoo architecture of a bare checkpoint without a manifest"
    )
    add_user_model_arguments(i, "benchmark", inputs=False)
    s = p.add_argument_group("server scenario")
    s.add_argument(
        "--qps",
        default=None,
        help="target rates, comma-separated (default: a ladder of fractions of the measured capacity)",
    )
    s.add_argument(
        "--max-wait-ms",
        type=float,
        default=req("max_wait_ms"),
        help="longest a query waits for a batch to fill (default %(default)g)",
    )
    s.add_argument(
        "--latency-bound-ms",
        type=float,
        default=req("latency_bound_ms"),
        help="search for the highest rate whose p99 latency stays within this bound",
    )
    add_backend_options(
        p.add_argument_group(
            "backend options (each backend's declared options; 'dlbench backends --options')"
        )
    )
    o = p.add_argument_group("output")
    o.add_argument("--timeout", type=float, default=req("timeout"), help="seconds per cell (default none)")
    o.add_argument(
        "--resume",
        action="store_true",
        default=req("resume"),
        help="skip cells already in the database with the same identity",
    )
    o.add_argument(
        "--db", default=req("db"), help="results database (default $DLBENCH_DB or results/dlbench.sqlite)"
    )
    o.add_argument(
        "--json", dest="json_path", default=req("json_path"), help="also write one record per cell here"
    )
    o.add_argument(
        "--quiet",
        "-q",
        "--no-progress",
        dest="quiet",
        action="store_true",
        help="no progress on stderr (--no-progress is the same)",
    )
    add_executor_arguments(p.add_argument_group("where the cells run"), "the cells", req("executor"))
    add_config_arguments(p)


# The namespace of the generated backend-option flags' values, apart from the command's own.
OPTION_DEST = "backend_option__"


def add_backend_options(g) -> None:
    """A flag per declared backend option, in the form it declares (``--NAME VALUE``; a
    switch ``--NAME`` / ``--no-NAME``; ``--NAME [VALUE]`` with a const), and ``-O
    NAME=VALUE`` for any of them.  Values are checked by the backend that takes them
    (``Option.parse``), so one flag serves backends with different choices.  A name that
    is already an option of the command keeps only its ``-O`` form."""
    import argparse

    from dlbench.harness.backends import declared_options

    taken = set(g._option_string_actions)
    for name, owners in declared_options().items():
        flag = "--" + name.replace("_", "-")
        if flag in taken:
            continue
        first = owners[0][1]
        same = all(o.choices == first.choices for _, o in owners)
        helps = "; ".join(
            f"{b.name}: {o.help or 'see its docs'}"
            + (f" (default {o.default})" if o.default is not None else "")
            for b, o in owners
        )
        if first.switch:
            g.add_argument(
                flag, dest=OPTION_DEST + name, default=None, help=helps, action=argparse.BooleanOptionalAction
            )
            continue
        g.add_argument(
            flag,
            dest=OPTION_DEST + name,
            default=None,
            nargs="?" if first.const is not None else None,
            const=first.const,
            choices=first.choices if same else None,
            help=helps,
            metavar=None if same and first.choices else "VALUE",
        )
    g.add_argument(
        "--backend-option",
        "-O",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any backend option by name (the flags above, and any a plugin declares); repeat",
    )


def _options(args) -> dict:
    from dlbench.core.errors import UserError
    from dlbench.harness.backends import declared_options

    opts = {}
    for kv in args.backend_option:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise UserError(f"--backend-option {kv!r}: expected KEY=VALUE")
        opts[key.strip().replace("-", "_")] = value.strip()
    for name in declared_options():
        value = getattr(args, OPTION_DEST + name, None)
        if value is not None:  # a switch gives True / False
            opts[name] = ("on" if value else "off") if isinstance(value, bool) else value
    return opts


def request_from(args, argv=None):
    from dlbench.harness.bench.input_args import collect, parse_input, parse_int_range, shapes_from
    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.bench.request import BenchRequest, split
    from dlbench.harness.cli.config import resolved

    # An option left unset keeps the request's own default (one place per default).
    unset = {k: v for k, v in (("scenarios", split(args.scenario) or None),) if v is not None}
    return BenchRequest(
        artifacts=args.artifacts,
        backends=args.backend,
        devices=args.device,
        precisions=args.precision,
        batch_sizes=split([args.batch_sizes], int),
        threads=split([args.threads], int) if args.threads else None,
        inter_op_threads=args.inter_op_threads,
        allocator=args.allocator,
        with_specs=list(args.with_specs),
        rule=StopRule(
            warmup=args.warmup,
            max_warmup=args.max_warmup,
            min_iterations=args.min_iterations,
            min_duration_s=args.min_duration,
            iterations=args.iterations,
        ),
        repeats=args.repeats,
        iqr_threshold=args.iqr_threshold,
        repeat_spread_threshold=args.repeat_spread_threshold,
        shapes=shapes_from(args.shape, args.shapes),
        int_ranges=dict(parse_int_range(r) for r in args.int_range),
        inputs=collect("--input", (parse_input(a) for a in args.inputs)),
        options=_options(args),
        device_id=args.device_id,
        seed=args.seed,
        qps=split([args.qps], float) if args.qps else None,
        max_wait_ms=args.max_wait_ms,
        latency_bound_ms=args.latency_bound_ms,
        model=args.model,
        model_from=args.model_from,
        weights=args.weights,
        timeout=args.timeout,
        resume=args.resume,
        db=args.db,
        json_path=args.json_path,
        argv=argv,
        executor=args.executor,
        ray_resources=list(args.ray_resources),
        config=resolved(args),
        **unset,
    )


def run(args) -> int:
    from dlbench.harness.bench.execute import run_bench
    from dlbench.harness.bench.table import bench_table, server_points_table

    req = request_from(args)
    if args.print_config:
        from dlbench.harness.bench.plan import validate
        from dlbench.harness.cli.config import to_toml

        validate(req)
        print(to_toml(req.config), end="")
        return 0
    records = run_bench(req, show_progress=not args.quiet)
    print(bench_table(records))
    for r in records:
        if r.get("scenario") == "server" and r["status"] != "failed":
            print(
                f"\nServer scenario, {r['model']} on {r['backend']} {r['device']}, max batch "
                f"{r['batch_size']}: latency-throughput points"
            )
            print(server_points_table(r))
    return 0 if all(r["status"] != "failed" for r in records) else 1
