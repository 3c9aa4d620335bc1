"""Where an ONNX model's time goes: ONNX Runtime's profiler, per op class and per node.

One cell, like a benchmark's: warm-up runs excluded, then --iterations runs profiled;
each node's kernel time per run, summed per op class beside that class's FLOPs on the
source graph.  Stored as a ``profile`` record.  Exit status: 0 profiled, 1 the cell
failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

HELP = "where an ONNX model's time goes: per op class and per node (ONNX Runtime's profiler)"


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.profile.runner import ProfileRequest

    flags.add_arguments(p, ProfileRequest)


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.profile.runner import ProfileRequest, profile
    from dlbench.harness.profile.table import profile_tables

    record = profile(flags.from_args(ProfileRequest, args))
    print(profile_tables(record))
    if record["status"] != "ok":
        print(f"dlbench profile: failed: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
