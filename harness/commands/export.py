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
    from dlbench.core import flags
    from dlbench.harness.convert.request import ExportRequest

    flags.add_arguments(p, ExportRequest)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.convert.export import export
    from dlbench.harness.convert.request import ExportRequest
    from dlbench.harness.convert.table import verification_table
    from dlbench.harness.output.progress import with_progress

    req = flags.from_args(ExportRequest, args)
    what = ", ".join(req.sources + ([req.model_from] if req.model_from else []))
    records = with_progress(
        args, f"export {what} to {req.options.format}", "export", lambda say: export(req, progress=say)
    )
    print(verification_table(records))
    return 0 if all(r["status"] == "ok" for r in records) else 1
