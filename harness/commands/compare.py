"""Compare two sets of measurements cell by cell: the throughput ratio, a bootstrap
confidence interval from the per-iteration samples, and a verdict.

BASELINE and CANDIDATE are run ids in the results database or `--json` files of
`dlbench train`/`bench`.  Without them, give an axis option twice (baseline
value, then candidate value): `--framework pytorch --framework mindspore`,
`--backend onnxruntime --backend tensorrt`, `--run RUN_A --run RUN_B`.  Cells pair
when they agree on everything but the compared axis.  Exit status 1 with
`--fail-on-regression PCT` when a cell is slower beyond noise by more than PCT %.
"""
from __future__ import annotations

HELP = "compare two runs, frameworks or backends cell by cell, with confidence intervals"


def add_arguments(p) -> None:
    p.add_argument("sources", nargs="*", metavar="BASELINE CANDIDATE",
                   help="run ids or --json files (two, or none with an axis option)")
    axes = p.add_argument_group("axis (give one twice: baseline value, then candidate value)")
    axes.add_argument("--framework", action="append", metavar="NAME")
    axes.add_argument("--backend", action="append", metavar="NAME")
    axes.add_argument("--run", action="append", metavar="RUN_ID")
    narrow = p.add_argument_group("narrowing filters (both sides)")
    narrow.add_argument("--model")
    narrow.add_argument("--kind", choices=("train", "bench"))
    narrow.add_argument("--precision")
    narrow.add_argument("--batch-size", type=int)
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence level of the interval (default 0.95)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (0)")
    p.add_argument("--min-effect", type=float, metavar="PCT", default=2.0,
                   help="changes smaller than PCT %% are within noise however narrow their "
                        "interval: separate processes differ by 1-2 %% (default 2)")
    p.add_argument("--fail-on-regression", type=float, metavar="PCT", default=None,
                   help="exit 1 when a cell is slower beyond noise by more than PCT %%")
    p.add_argument("--allow-different-machines", action="store_true",
                   help="pair records measured on different machines")
    p.add_argument("--db", default=None, help="results database ($DLBENCH_DB or "
                                              "results/dlbench.sqlite)")
    p.add_argument("--json", dest="json_path", default=None, help="also write the pairs here")


def run(args) -> int:
    from dlbench.models.atomic import check_can_create, write_json
    from dlbench.harness.compare import compare
    from dlbench.harness.compare.sources import Filters, axis_values, load_sides
    from dlbench.harness.compare.table import (comparison_table, footnote, paper_table, unmatched)
    from dlbench.models.errors import UserError
    from dlbench.harness.results import ResultStore

    if not 0 < args.confidence < 1:
        raise UserError(f"--confidence must be between 0 and 1, not {args.confidence}")
    if args.resamples < 100:
        raise UserError(f"--resamples must be at least 100, not {args.resamples}")
    if args.fail_on_regression is not None and not 0 <= args.fail_on_regression < 100:
        raise UserError(f"--fail-on-regression takes a percentage in [0, 100), "
                        f"not {args.fail_on_regression}")
    if not 0 <= args.min_effect < 100:
        raise UserError(f"--min-effect takes a percentage in [0, 100), not {args.min_effect}")
    if args.batch_size is not None and args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, not {args.batch_size}")
    filters = Filters(model=args.model, kind=args.kind, precision=args.precision,
                      batch_size=args.batch_size)
    axes = []
    for name in ("framework", "backend"):
        values = axis_values(name, getattr(args, name))
        if values:
            filters.baseline[name], filters.candidate[name] = values
            axes.append(name)
    runs = axis_values("run", args.run)
    if args.json_path:
        check_can_create(args.json_path)
    store = ResultStore(args.db)
    baseline, candidate = load_sides(args.sources, store, filters, runs)
    result = compare(baseline, candidate, axes=axes,
                     allow_different_machines=args.allow_different_machines,
                     confidence=args.confidence, resamples=args.resamples, seed=args.seed,
                     min_effect=args.min_effect / 100)

    names = args.sources or (list(runs) if runs else [
        " ".join(f"{k}={v}" for k, v in side.items())
        for side in (filters.baseline, filters.candidate)])
    print(f"Baseline: {names[0]} ({len(baseline)} record(s)); "
          f"candidate: {names[1]} ({len(candidate)} record(s))\n")
    show_machine = args.allow_different_machines or result.crosses_machines or len(
        {r.get("machine_id") for r in baseline + candidate}) > 1
    print(comparison_table(result, args.confidence, show_machine))
    print()
    print(footnote(args.confidence, args.resamples, args.min_effect / 100))
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
            print(f"REGRESSION: {len(bad)} cell(s) slower by more than "
                  f"{args.fail_on_regression:g} % beyond noise")
            status = 1
        else:
            print(f"no cell slower by more than {args.fail_on_regression:g} % beyond noise")
    if args.json_path:
        write_json(args.json_path, {
            "baseline": names[0], "candidate": names[1], "axes": axes,
            "confidence": args.confidence, "resamples": args.resamples, "seed": args.seed,
            "pairs": [p.to_dict() for p in result.pairs],
            "only_baseline": [r.get("id") for r in result.only_baseline],
            "only_candidate": [r.get("id") for r in result.only_candidate],
            "fail_on_regression": args.fail_on_regression, "exit_status": status})
    return status
