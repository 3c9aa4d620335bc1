"""Score a model on a data set's held-out split: top-1 accuracy and loss next to the speed figures.

ARTIFACT is an ONNX file (fp32, fp16 or int8: run as built), a TensorRT
engine, a MindIR file, or a native checkpoint (a 'dlbench train' output
directory, its manifest.json, or a bare .pt/.keras/.ckpt with --model).  It
runs in its own process on one backend (default: ONNX Runtime for ONNX, the
checkpoint's own framework for a checkpoint) over the held-out split of
--data, the same split and preprocessing that 'dlbench train --eval' reports
on.  One 'eval' record is stored.  Exit status: 0 scored, 1 the run failed
(stored as failed), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from dlbench.harness.commands import print_notes

HELP = "top-1 accuracy and loss of a checkpoint or model file on a held-out split"


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.evaluate.runner import EvalRequest

    flags.add_arguments(p, EvalRequest)


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.evaluate.runner import EvalRequest, evaluate
    from dlbench.harness.evaluate.table import eval_table

    req = flags.from_args(EvalRequest, args)
    record = evaluate(req)
    print(eval_table([record]))
    print_notes("eval", record)
    if record["status"] != "ok":
        print(f"dlbench eval: failed: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
