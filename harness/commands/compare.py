"""Compare two sets of measurements cell by cell: the throughput ratio, a bootstrap
confidence interval from the per-iteration samples, and a verdict.

BASELINE and CANDIDATE are run ids in the results database or `--json` files of
`dlbench train`/`bench`.  Without them, give an axis option twice (baseline
value, then candidate value): `--framework pytorch --framework mindspore`,
`--backend onnxruntime --backend tensorrt`, `--run RUN_A --run RUN_B`.  Cells pair
when they agree on everything but the compared axis.  Exit status 1 with
`--fail-on-regression PCT` when a cell is slower beyond noise by more than PCT %.

`--calibrate [ARTIFACT]` measures this machine's noise floor instead: one cell
(a built-in model without ARTIFACT) in `--processes` fresh processes through
the bench path; later compares on this machine use it unless `--min-effect`.
"""

from __future__ import annotations

HELP = "compare two runs, frameworks or backends cell by cell, with confidence intervals"


def add_arguments(p) -> None:
    from dlbench.harness.cli.config import field_default
    from dlbench.harness.compare.noise import Calibration

    p.add_argument(
        "sources",
        nargs="*",
        metavar="BASELINE CANDIDATE",
        help="run ids or --json files (two, or none with an axis option)",
    )
    axes = p.add_argument_group("axis (give one twice: baseline value, then candidate value)")
    axes.add_argument("--framework", action="append", metavar="NAME")
    axes.add_argument("--backend", action="append", metavar="NAME")
    axes.add_argument(
        "--with",
        dest="with_",
        action="append",
        metavar="PACKAGE==VERSION",
        help="the --with environments of micro cells ('installed': dlbench's own)",
    )
    axes.add_argument(
        "--devices",
        action="append",
        metavar="N",
        help="data-parallel training cells on N devices (dlbench train --devices)",
    )
    axes.add_argument("--run", action="append", metavar="RUN_ID")
    narrow = p.add_argument_group("narrowing filters (both sides)")
    narrow.add_argument("--model")
    narrow.add_argument("--kind", choices=("train", "bench", "micro"))
    narrow.add_argument("--precision")
    narrow.add_argument("--batch-size", type=int)
    p.add_argument(
        "--confidence", type=float, default=0.95, help="confidence level of the interval (default 0.95)"
    )
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (0)")
    p.add_argument(
        "--min-effect",
        type=float,
        metavar="PCT",
        default=None,
        help="changes smaller than PCT %% are within noise however narrow their "
        "interval (default: the noise floor --calibrate measured on the "
        "records' machine, else 2)",
    )
    p.add_argument(
        "--fail-on-regression",
        type=float,
        metavar="PCT",
        default=None,
        help="exit 1 when a cell is slower beyond noise by more than PCT %%",
    )
    p.add_argument(
        "--allow-different-machines", action="store_true", help="pair records measured on different machines"
    )
    p.add_argument("--db", default=None, help="results database ($DLBENCH_DB or results/dlbench.sqlite)")
    p.add_argument("--json", dest="json_path", default=None, help="also write the pairs here")
    cal = p.add_argument_group("noise floor (--calibrate)")
    cal.add_argument(
        "--calibrate",
        nargs="?",
        const="",
        default=None,
        metavar="ARTIFACT",
        help="measure and store this machine's noise floor: one cell of ARTIFACT "
        "(default a built-in ONNX model) in --processes fresh processes; "
        "--backend (once), --batch-size and --threads pick the cell",
    )
    cal.add_argument(
        "--processes",
        type=int,
        default=field_default(Calibration, "processes"),
        help="fresh processes for --calibrate (default %(default)s)",
    )
    cal.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads of the --calibrate cell (default physical cores)",
    )
    cal.add_argument(
        "--min-duration",
        type=float,
        default=None,
        help="seconds each --calibrate process measures at least (default bench's)",
    )
    cal.add_argument(
        "--timeout", type=float, default=None, help="seconds per --calibrate process (default none)"
    )


def run(args) -> int:
    from dlbench.core.atomic import check_can_create, write_json
    from dlbench.core.errors import UserError
    from dlbench.core.flags import split
    from dlbench.harness.cli.config import field_default
    from dlbench.harness.compare import compare
    from dlbench.harness.compare.noise import Calibration, floor_for
    from dlbench.harness.compare.sources import INSTALLED, Filters, axis_values, load_sides
    from dlbench.harness.compare.table import comparison_table, footnote, paper_table, unmatched
    from dlbench.harness.store.results import ResultStore

    if not 0 < args.confidence < 1:
        raise UserError(f"--confidence must be between 0 and 1, not {args.confidence}")
    if args.resamples < 100:
        raise UserError(f"--resamples must be at least 100, not {args.resamples}")
    if args.fail_on_regression is not None and not 0 <= args.fail_on_regression < 100:
        raise UserError(f"--fail-on-regression takes a percentage in [0, 100), not {args.fail_on_regression}")
    if args.min_effect is not None and not 0 <= args.min_effect < 100:
        raise UserError(f"--min-effect takes a percentage in [0, 100), not {args.min_effect}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, not {args.batch_size}")
    if args.calibrate is not None:
        return _calibrate(args)
    stray = [
        flag
        for flag, value, unset in (
            ("--processes", args.processes, field_default(Calibration, "processes")),
            ("--threads", args.threads, None),
            ("--min-duration", args.min_duration, None),
            ("--timeout", args.timeout, None),
        )
        if value != unset
    ]
    if stray:
        raise UserError(f"{stray[0]} applies to --calibrate only")
    filters = Filters(model=args.model, kind=args.kind, precision=args.precision, batch_size=args.batch_size)
    axes = []
    for name in ("framework", "backend", "with", "devices"):
        values = axis_values(name, getattr(args, "with_" if name == "with" else name))
        if values:
            if name == "with":  # the installed packages: no --with environment
                values = tuple(None if v == INSTALLED else v for v in values)
            if name == "devices":
                values = tuple(split([v], int)[0] for v in values)
            filters.baseline[name], filters.candidate[name] = values
            axes.append(name)
    runs = axis_values("run", args.run)
    if args.json_path:
        check_can_create(args.json_path)
    store = ResultStore(args.db)
    baseline, candidate = load_sides(args.sources, store, filters, runs)
    floor = floor_for(store, baseline + candidate, args.min_effect)
    result = compare(
        baseline,
        candidate,
        axes=axes,
        allow_different_machines=args.allow_different_machines,
        confidence=args.confidence,
        resamples=args.resamples,
        seed=args.seed,
        min_effect=floor.value,
    )

    names = args.sources or (
        list(runs)
        if runs
        else [" ".join(f"{k}={v}" for k, v in side.items()) for side in (filters.baseline, filters.candidate)]
    )
    print(
        f"Baseline: {names[0]} ({len(baseline)} record(s)); "
        f"candidate: {names[1]} ({len(candidate)} record(s)); {floor.describe()}\n"
    )
    show_machine = (
        args.allow_different_machines
        or result.crosses_machines
        or len({r.get("machine_id") for r in baseline + candidate}) > 1
    )
    print(comparison_table(result, args.confidence, show_machine))
    print()
    print(footnote(args.confidence, args.resamples, floor))
    extra = unmatched(result)
    if extra:
        print()
        print(extra)
    if "framework" in axes:
        table2 = paper_table(result)
        if table2:
            print()
            print(table2)
    status = 0
    if args.fail_on_regression is not None:
        bad = result.regressions(args.fail_on_regression)
        print()
        if bad:
            print(
                f"REGRESSION: {len(bad)} cell(s) slower by more than "
                f"{args.fail_on_regression:g} % beyond noise"
            )
            status = 1
        else:
            print(f"no cell slower by more than {args.fail_on_regression:g} % beyond noise")
    if args.json_path:
        write_json(
            args.json_path,
            {
                "baseline": names[0],
                "candidate": names[1],
                "axes": axes,
                "confidence": args.confidence,
                "resamples": args.resamples,
                "seed": args.seed,
                "noise_floor": floor.to_dict(),
                "pairs": [p.to_dict() for p in result.pairs],
                "only_baseline": [r.get("id") for r in result.only_baseline],
                "only_candidate": [r.get("id") for r in result.only_candidate],
                "fail_on_regression": args.fail_on_regression,
                "exit_status": status,
            },
        )
    return status


def _calibrate(args) -> int:
    """``--calibrate``: measure, store and print this machine's noise floor."""
    import sys

    from dlbench.core.errors import UserError
    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.cli.config import field_default
    from dlbench.harness.compare.noise import Calibration, calibrate

    if args.sources or args.run or args.framework:
        raise UserError(
            "--calibrate measures a noise floor: give no BASELINE CANDIDATE, --run or --framework"
        )
    if args.backend and len(args.backend) != 1:
        raise UserError("--calibrate runs one cell: give --backend once")
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be at least 1, not {args.threads}")
    if args.json_path:
        from dlbench.core.atomic import check_can_create

        check_can_create(args.json_path)
    rule = StopRule()
    if args.min_duration is not None:
        rule.min_duration_s = args.min_duration
    cal = Calibration(
        artifact=args.calibrate or None,
        backend=(args.backend or [field_default(Calibration, "backend")])[0],
        batch_size=args.batch_size or field_default(Calibration, "batch_size"),
        threads=args.threads,
        processes=args.processes,
        rule=rule,
        db=args.db,
        timeout=args.timeout,
        argv=sys.argv[1:],
    )
    floor, bench, stored = calibrate(cal, show_progress=sys.stderr.isatty())
    if floor is None:
        print(f"calibration FAILED: {bench['error']}")
        return 1
    thr = ", ".join(f"{t:.4g}" for t in stored["metrics"]["throughputs_sps"])
    print(
        f"{floor.describe()}: {stored['metrics']['statistic']} of {bench['model']} on "
        f"{bench['backend']} {bench['device']} {bench['precision']}, batch "
        f"{bench['batch_size']}, {bench['intra_op_threads']} thread(s): {thr} samples/s"
    )
    print(
        f"stored for machine {stored['machine_id']} (record {stored['id']}); compares of "
        f"records from this machine use it unless --min-effect is given"
    )
    if args.json_path:
        from dlbench.core.atomic import write_json

        write_json(
            args.json_path, {"noise_floor": floor.to_dict(), "record": stored, "bench_record_id": bench["id"]}
        )
    return 0
