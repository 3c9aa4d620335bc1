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
    """The request's declared flags (``BenchRequest``), the backends' declared options,
    and what only steers this invocation (progress, --config)."""
    from dlbench.core import flags
    from dlbench.harness.bench.input_args import INPUTS_GROUP
    from dlbench.harness.bench.measure import MEASUREMENT
    from dlbench.harness.bench.request import OUTPUT, SERVER, BenchRequest
    from dlbench.harness.cli.config import add_config_arguments
    from dlbench.harness.executors import WHERE_GROUP

    for title in (MEASUREMENT, INPUTS_GROUP, SERVER):  # the order --help shows them in
        p.add_argument_group(title)
    backend_group = p.add_argument_group(
        "backend options (each backend's declared options; 'dlbench backends --options')"
    )
    output = p.add_argument_group(OUTPUT)
    p.add_argument_group(WHERE_GROUP)
    flags.add_arguments(p, BenchRequest)
    add_backend_options(backend_group)
    output.add_argument(
        "--quiet",
        "-q",
        "--no-progress",
        dest="quiet",
        action="store_true",
        help="no progress on stderr (--no-progress is the same)",
    )
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


def backend_options(args) -> dict:
    """The backend options the flags and ``-O`` gave (bench's and run's alike)."""
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
    from dlbench.core import flags
    from dlbench.harness.bench.request import BenchRequest
    from dlbench.harness.cli.config import resolved

    return flags.from_args(
        BenchRequest, args, options=backend_options(args), argv=argv, config=resolved(args)
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
    # A cell's refusal (a file one backend cannot read) is that cell's: the sweep's other
    # cells run, as train's do, and the refusals end the command after the tables.
    refused: list[str] = []
    records = run_bench(req, show_progress=not args.quiet, refusals=refused)
    from dlbench.harness.store.results import ResultStore
    from dlbench.harness.tune.headroom import annotate

    annotate(records, ResultStore(req.db))
    print(bench_table(records))
    from dlbench.harness.profile.advice import advise

    for line in advise(records):  # why a build did not pay, from profiles
        print(f"\nadvice: {line}")
    for r in records:
        if r.get("scenario") == "server" and r["status"] != "failed":
            print(
                f"\nServer scenario, {r['model']} on {r['backend']} {r['device']}, max batch "
                f"{r['batch_size']}: latency-throughput points"
            )
            print(server_points_table(r))
    if refused:
        from dlbench.core.errors import UserError

        raise UserError("; ".join(refused))
    return 0 if all(r["status"] != "failed" for r in records) else 1
