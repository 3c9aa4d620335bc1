"""The synthetic benchmark (StatsNet): one generated network that stands for a set of
applications, and how well it predicts them.

  dlbench synth profile A.onnx B.onnx=2 ...   the applications' workload: per node its
      op, shapes, FLOPs, bytes and time on two reference configurations; motifs
  dlbench synth generate synth/workload.json  k-medoid representatives of the real
      shapes, repeated (non-negative least squares) to the workload's time shares on
      every reference; a static self-check of the predicted shares; an ONNX file that
      bench, build, compare and report take like any other
  dlbench synth validate synth/synthetic.json the applications and the network across a
      matrix of configurations: rank correlation, ratio errors and pairwise agreement of
      its predicted score, beside each application alone and the best pair

The score is derived (MLPerf's sense): a prediction of the applications' weighted
geometric-mean speed ratio.  Exit status: 0 done, 1 the self-check or a cell failed,
2 bad input.
"""

from __future__ import annotations

import argparse
import sys

HELP = "the synthetic benchmark: profile applications, generate one network that stands for them, validate it"

STEPS = {
    "profile": ("SynthProfileRequest", "the applications' workload on the reference configurations"),
    "generate": ("SynthGenerateRequest", "the synthetic network from a workload"),
    "validate": ("SynthValidateRequest", "the network's predictions against the applications, over a matrix"),
}

OPTIONS = {  # the steps that take backend options, and what they set
    "profile": "backend options of every profile and timing (kept in the workload for generate)",
    "validate": "backend options of every cell of the matrix",
}


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.synth import request

    sub = p.add_subparsers(dest="step", metavar="STEP", required=True)
    for name, (cls, help_) in STEPS.items():
        q = sub.add_parser(name, help=help_, description=help_)
        flags.add_arguments(q, getattr(request, cls))
        if name in OPTIONS:  # their cells are bench's and profile's, with bench's options
            from dlbench.harness.commands.bench import add_backend_options

            add_backend_options(q.add_argument_group(OPTIONS[name]))
        q.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.output.progress import with_progress
    from dlbench.harness.synth import ProfileFailed, request, steps

    extra = {}
    if args.step in OPTIONS:
        from dlbench.harness.commands.bench import backend_options

        extra["options"] = backend_options(args)
    req = flags.from_args(getattr(request, STEPS[args.step][0]), args, **extra)
    work = getattr(steps, args.step)
    try:
        result = with_progress(args, f"synth {args.step}", "synth", lambda say: work(req, say))
    except ProfileFailed as exc:  # a cell failed: the step measured nothing to show
        print(f"dlbench synth {args.step}: failed: {exc}", file=sys.stderr)
        return 1
    print(result["table"])
    return 0 if result["status"] == "ok" else 1
