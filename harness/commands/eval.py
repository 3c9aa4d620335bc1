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
    p.add_argument(
        "artifact", metavar="ARTIFACT", help="ONNX file, TensorRT engine, MindIR, or a dlbench train output"
    )
    p.add_argument(
        "--data",
        default="digits",
        metavar="DATA",
        help="data set with a held-out split, as for 'dlbench train --data' "
        "(default: digits, scikit-learn's bundled handwritten digits)",
    )
    p.add_argument(
        "--backend",
        "-b",
        default=None,
        help="backend to run on (default: onnxruntime for ONNX, the framework for a "
        "checkpoint, tensorrt for an engine)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda or ascend (default: the backend's)")
    p.add_argument("--batch-size", type=int, default=64, help="inference batch (default 64)")
    p.add_argument(
        "--limit", type=int, default=None, help="score at most this many held-out samples (default: all)"
    )
    p.add_argument("--model", "-m", default=None, help="zoo model of a bare checkpoint")
    p.add_argument("--threads", type=int, default=None, help="intra-op threads")
    p.add_argument("--db", default=None, help="results database")
    p.add_argument("--json", dest="json_path", default=None, help="also write the record here")
    p.add_argument("--timeout", type=float, default=None, help="seconds for the eval cell")


def run(args: argparse.Namespace) -> int:
    from dlbench.harness.evaluate.runner import EvalRequest, evaluate
    from dlbench.harness.evaluate.table import eval_table

    req = EvalRequest(
        artifact=args.artifact,
        data=args.data,
        backend=args.backend,
        device=args.device,
        batch_size=args.batch_size,
        limit=args.limit,
        model=args.model,
        threads=args.threads,
        db=args.db,
        json_path=args.json_path,
        timeout=args.timeout,
    )
    record = evaluate(req)
    print(eval_table([record]))
    print_notes("eval", record)
    if record["status"] != "ok":
        print(f"dlbench eval: failed: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
