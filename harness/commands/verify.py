"""Run REFERENCE and CANDIDATE on the same fixed inputs and judge the candidate.

Each may be a checkpoint (dlbench train directory, manifest.json, or a bare
.pt/.keras/.ckpt with --model), an ONNX file, a MindIR file, or a TensorRT
engine with its sidecar (on the GPU and TensorRT that built it).  Per output:
max abs and relative difference, mean abs difference, worst per-sample cosine,
top-1 agreement for classifiers; tolerances follow the candidate's precision
(or --precision).  Exit status: 0 within tolerance, 1 over tolerance or a run
failed (stored as unverified / failed), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from dlbench.harness.commands import print_notes

HELP = "compare a converted model with its source on fixed inputs"


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.verify.command import VerifyRequest

    flags.add_arguments(p, VerifyRequest)


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.convert.table import verification_table
    from dlbench.harness.verify import command as verify

    req = flags.from_args(verify.VerifyRequest, args)
    record = verify.verify_files(req)
    print(verification_table([record]))
    print_notes("verify", record)
    if record["metrics"].get("layer_errors"):
        from dlbench.harness.verify.layers import layer_table

        print(layer_table(record["metrics"]["layer_errors"]))
    if record["status"] != "ok":
        print(f"dlbench verify: {record['status']}: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
