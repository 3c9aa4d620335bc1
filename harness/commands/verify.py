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
    p.add_argument("reference", metavar="REFERENCE", help="the source: checkpoint or fp32 ONNX")
    p.add_argument("candidate", metavar="CANDIDATE", help="the converted model")
    p.add_argument(
        "--precision",
        default=None,
        choices=("fp32", "fp16", "int8", "best"),
        help="tolerance to apply (default: the candidate's precision)",
    )
    p.add_argument("--batch-sizes", default="1,8", help="batch sizes to run (default 1,8)")
    p.add_argument("--seed", type=int, default=None, help="seed of the inputs")
    p.add_argument("--framework", "-f", default=None, help="framework of a bare checkpoint")
    p.add_argument("--model", "-m", default=None, help="zoo model of a bare checkpoint")
    p.add_argument(
        "--rtol", type=float, default=None, help="max abs diff bound: atol + rtol × max|reference|"
    )
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--min-cosine", type=float, default=None)
    p.add_argument("--min-top1", type=float, default=None)
    p.add_argument(
        "--layers",
        action="store_true",
        help="int8 ONNX: also compare every layer with the fp32 ONNX source and print the worst by SQNR",
    )
    p.add_argument("--threads", type=int, default=None, help="intra-op threads")
    p.add_argument("--db", default=None, help="results database")
    p.add_argument("--json", dest="json_path", default=None, help="also write the record here")
    p.add_argument("--timeout", type=float, default=None, help="seconds per runner cell")
    from dlbench.core import flags
    from dlbench.harness.bench.input_args import InputFields

    flags.add_arguments(p, InputFields)  # a dynamic dimension's size, an input's values


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.bench.input_args import InputFields
    from dlbench.harness.convert.table import verification_table
    from dlbench.harness.verify import command as verify

    req = verify.VerifyRequest(
        **flags.values(InputFields, args),
        reference=args.reference,
        candidate=args.candidate,
        precision=args.precision,
        batch_sizes=verify.parse_batch_sizes(args.batch_sizes),
        seed=verify.VERIFY_SEED if args.seed is None else args.seed,
        framework=args.framework,
        model=args.model,
        overrides={
            "rtol": args.rtol,
            "atol": args.atol,
            "min_cosine": args.min_cosine,
            "min_top1": args.min_top1,
        },
        threads=args.threads,
        db=args.db,
        json_path=args.json_path,
        timeout=args.timeout,
        layers=args.layers,
    )
    record = verify.verify_files(req)
    print(verification_table([record]))
    print_notes("verify", record)
    if record["metrics"].get("layer_errors"):
        from dlbench.harness.verify.layers import layer_table

        print(layer_table(record["metrics"]["layer_errors"]))
    if record["status"] != "ok":
        print(f"dlbench verify: {record['status']}: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
