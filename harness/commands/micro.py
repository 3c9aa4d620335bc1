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
    from dlbench.harness.micro.ops import DEFAULTS

    shape = (
        "GEMM MxKxN (or N), convolution NxCxHxW:KkR[sS], memory MiB per array; repeat or "
        "comma-separate (defaults: " + "; ".join(f"{k} {','.join(v)}" for k, v in DEFAULTS.items()) + ")"
    )
    add_common_arguments(p, {"shapes": shape}, skip={"layer", "modes"})


def add_common_arguments(p, helps: dict[str, str], skip: set[str], layer: bool = False) -> None:
    """What ``micro`` and ``layer`` share (``MicroRequest``'s declarations), each command
    wording ``--shape`` itself and naming its own engines."""
    from dlbench.core import flags
    from dlbench.harness.micro.engines import ENGINES, LAYER_ENGINES
    from dlbench.harness.micro.sweep import MicroRequest

    engines = (
        f"{', '.join(LAYER_ENGINES if layer else ENGINES)}; repeat or comma-separate, the first the "
        f"reference (default: every installed one)"
    )
    flags.add_arguments(p, MicroRequest, skip=skip, helps={**helps, "engines": engines})
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def request_from(args, argv=None, **given):
    from dlbench.core import flags
    from dlbench.harness.micro.sweep import MicroRequest

    return flags.from_args(MicroRequest, args, argv=argv, **given)


def run(args) -> int:
    return run_request(request_from(args), args.quiet)


def run_request(req, quiet: bool) -> int:
    from dlbench.harness.micro.sweep import run_micro
    from dlbench.harness.micro.table import micro_table

    records = run_micro(req, show_progress=not quiet)
    print(micro_table(records))
    return 0 if all(r["status"] != "failed" for r in records) else 1
