"""Build an fp32 ONNX model into a TensorRT engine, an INT8 ONNX or an FP16 ONNX, and verify it.

--to tensorrt: a serialized engine (needs an NVIDIA GPU, tensorrt and
  cuda-python; elsewhere exit 2 with the reason), with an optimization
  profile over --batch-sizes, a workspace limit, a reusable timing cache and,
  for INT8 on TensorRT 10, entropy calibration with a reusable cache.  A JSON
  sidecar next to the engine records the TensorRT version and GPU it belongs to.
--to int8: ONNX Runtime static quantization (QDQ, per-channel weights,
  calibration from --calib-data FILE.npz, --calib-data digits (the training
  split) or synthetic images), or --dynamic.  Fixed-range ops at the outputs
  (a final Softmax) stay float unless --no-float-tail; --exclude-nodes and
  --exclude-op-types leave more in float.  An unverified build prints the
  worst layers by SQNR against fp32.
--to fp16: float16 weights and compute, float32 I/O unless --no-keep-io-types.

Old graphs are normalized first (initializers that are also inputs frozen,
an opset below the tool's raised by onnx's version converter, two-input Sum
nodes written as Add, constant subgraphs folded by ONNX Runtime's basic
optimizer) and checked against the original.  A model with a fixed batch is verified and calibrated
at that batch.

The result runs on the same fixed inputs as the fp32 model and is judged with
its precision's tolerance.  Exit status: 0 verified, 1 failed or over
tolerance (kept, stored as unverified), 2 bad input or a machine that cannot build it.
"""

from __future__ import annotations

import argparse
import sys

from dlbench.harness.commands import print_notes

HELP = "build TensorRT engines or INT8/FP16 ONNX models from fp32 ONNX, verified"


def add_arguments(p) -> None:
    """The request's declared flags (``BuildRequest``, its ``BuildOptions`` and the input
    group), each build option's help prefixed with the targets that read it."""
    from dlbench.converters.base import option_targets
    from dlbench.core import flags
    from dlbench.harness.convert.request import BuildRequest

    takers = option_targets()

    def only(field: str) -> str:
        return "/".join(takers[field]) + ": " if field in takers else ""

    flags.add_arguments(p, BuildRequest, prefix=only)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.convert.build import build
    from dlbench.harness.convert.request import BuildRequest
    from dlbench.harness.convert.table import verification_table
    from dlbench.harness.output.progress import with_progress

    req = flags.from_args(BuildRequest, args)
    record = with_progress(args, f"build {args.to} from {args.source}", "build", lambda say: build(req))
    print(verification_table([record]))
    print_notes("build", record)
    if record["metrics"].get("layer_errors"):
        from dlbench.harness.verify.layers import layer_table

        print(layer_table(record["metrics"]["layer_errors"]))
    if record["status"] != "ok":
        print(f"dlbench build: {record['status']}: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
