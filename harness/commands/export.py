"""Export native checkpoints to ONNX (or MindIR) and verify each against its own framework.

A checkpoint is a `dlbench train` output directory, its manifest.json, or a
bare .pt/.keras/.ckpt with --model (and --framework if the suffix does not
say).  Your own model is a TorchScript archive, a torch.export .pt2, a
.keras or Keras .h5 file, a SavedModel directory, or --model-from code; it
keeps its own input and output names (--canonical-names: input/logits), and
its inputs come from its signature (--shape/--input where it has none).  The framework runs in its
own process: it computes the reference
outputs on fixed inputs (batch 1 and 8 by default) and writes the file;
ONNX Runtime then runs the file on the same inputs and the verifier judges.
Every exported ONNX file takes one input "input" (N×C×H×W float32, dynamic
batch) and returns "logits".  Exit status: 0 all verified, 1 an export
failed or is over tolerance (stored as unverified), 2 bad input.
"""

from __future__ import annotations

import argparse

HELP = "export native checkpoints to ONNX/MindIR and verify them against the framework"


def add_arguments(p) -> None:
    from dlbench.harness.commands import add_user_model_arguments

    p.add_argument(
        "checkpoints",
        nargs="*",
        metavar="MODEL",
        help="dlbench train output directory, manifest.json, a bare checkpoint, or "
        "your own model file (TorchScript, .pt2, .keras, .h5, SavedModel)",
    )
    add_user_model_arguments(p, "export")
    p.add_argument(
        "--canonical-names",
        action="store_true",
        help="name a one-input, one-output model's tensors input/logits, as dlbench's "
        "own exports (default: the model's own names)",
    )
    p.add_argument(
        "--framework", "-f", default=None, help="framework of a bare checkpoint (default: from its suffix)"
    )
    p.add_argument("--model", "-m", default=None, help="zoo model of a bare checkpoint")
    p.add_argument(
        "--out", "-o", default=None, help="output file (one checkpoint only; default: model.onnx next to it)"
    )
    p.add_argument(
        "--format",
        default="onnx",
        choices=("onnx", "mindir"),
        help="onnx (default) or mindir (MindSpore only: what Ascend loads)",
    )
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (default 17)")
    batch = p.add_mutually_exclusive_group()
    batch.add_argument(
        "--dynamic-batch",
        dest="dynamic_batch",
        action="store_true",
        default=True,
        help="symbolic batch dimension (default)",
    )
    batch.add_argument(
        "--static-batch",
        dest="dynamic_batch",
        action="store_false",
        help="fixed batch dimension of --batch-size",
    )
    p.add_argument(
        "--batch-size", type=int, default=1, help="the fixed batch with --static-batch (default 1)"
    )
    p.add_argument(
        "--exporter",
        default="torchscript",
        choices=("torchscript", "dynamo"),
        help="PyTorch exporter (dynamo needs onnxscript)",
    )
    p.add_argument("--verify-batch-sizes", default="1,8", help="batch sizes the verifier runs (default 1,8)")
    p.add_argument(
        "--seed", type=int, default=None, help="seed of the verification inputs (default: the verifier's own)"
    )
    p.add_argument("--threads", type=int, default=None, help="intra-op threads")
    p.add_argument("--db", default=None, help="results database")
    p.add_argument("--json", dest="json_path", default=None, help="also write the records here")
    p.add_argument("--timeout", type=float, default=None, help="seconds per export cell")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    from dlbench.converters.base import ExportOptions
    from dlbench.harness.commands import user_inputs
    from dlbench.harness.convert.export import ExportRequest, export
    from dlbench.harness.convert.table import verification_table
    from dlbench.harness.output.progress import with_progress
    from dlbench.harness.verify import inputs as verify

    req = ExportRequest(
        sources=args.checkpoints,
        framework=args.framework,
        model=args.model,
        out=args.out,
        model_from=args.model_from,
        weights=args.weights,
        **dict(zip(("shapes", "inputs"), user_inputs(args))),
        canonical_names=args.canonical_names,
        options=ExportOptions(
            format=args.format,
            opset=args.opset,
            dynamic_batch=args.dynamic_batch,
            batch_size=args.batch_size,
            exporter=args.exporter,
        ),
        batch_sizes=verify.parse_batch_sizes(args.verify_batch_sizes),
        seed=verify.VERIFY_SEED if args.seed is None else args.seed,
        threads=args.threads,
        db=args.db,
        json_path=args.json_path,
        timeout=args.timeout,
    )
    what = ", ".join(args.checkpoints + ([args.model_from] if args.model_from else []))
    records = with_progress(
        args, f"export {what} to {args.format}", "export", lambda say: export(req, progress=say)
    )
    print(verification_table(records))
    return 0 if all(r["status"] == "ok" for r in records) else 1
