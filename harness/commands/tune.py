"""Search the settings each backend and build target declares for the best throughput
(optionally under a p99 bound) and the best latency, within a wall-time budget.

The search is successive halving over fresh-process bench cells: many points measured
briefly, the best third measured three times longer, and so on; a point a short
measurement ruled out never gets a long one.  The last few points are measured three
times each, in fresh processes taken in turn, and ranked by the median.  Each objective's
best point is written as a config (FOLDER/BACKEND.OBJECTIVE.toml) that 'dlbench bench
--config' runs as it is, and stored as a 'tune' record that later bench tables and
reports compare their rows with ("-18 % vs tuned").  Exit status: 0 a best was found,
1 no point could be measured, 2 bad input.
"""

from __future__ import annotations

HELP = "search the declared settings (threads, allocator, backend options, builds, batch) for the best"


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.cli.config import add_config_arguments
    from dlbench.harness.tune.request import TuneRequest

    flags.add_arguments(p, TuneRequest)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_config_arguments(p)


def run(args) -> int:
    import sys

    from dlbench.core import flags
    from dlbench.harness.tune.request import TuneRequest
    from dlbench.harness.tune.run import tune

    req = flags.from_args(TuneRequest, args)
    if args.print_config:
        from dlbench.harness.cli.config import resolved, to_toml

        req.check()
        print(to_toml(resolved(args)), end="")
        return 0

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    result = tune(req, say, argv=sys.argv)
    print("\n\n".join(result["tables"]))
    for path in result["configs"]:
        print(f"\nreproduce: dlbench bench --config {path}   (the whole chain: dlbench run --config {path})")
    return 0 if result["records"] else 1
