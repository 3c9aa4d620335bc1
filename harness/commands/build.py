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
    from dlbench.converters.base import BUILD_TARGETS, BuildOptions, build_hop, option_targets
    from dlbench.harness.cli.config import field_default

    takers = option_targets()

    def only(field: str) -> str:
        """The targets an option applies to, as its help's prefix."""
        return "/".join(takers.get(field, ())) + ": "

    targets = BUILD_TARGETS.names()
    precisions = tuple(dict.fromkeys(p for t in targets for p in build_hop(t).precisions))
    p.add_argument("model", metavar="MODEL.onnx", help="fp32 ONNX model (dlbench export's output)")
    p.add_argument(
        "--to",
        required=True,
        choices=targets,
        help="; ".join(f"{t}: {build_hop(t).summary}" for t in targets),
    )
    p.add_argument(
        "--out",
        "-o",
        default=None,
        help="output file (default: MODEL.int8.onnx, MODEL.fp16.onnx, MODEL.PRECISION.plan)",
    )
    p.add_argument(
        "--precision",
        default=None,
        choices=precisions,
        help=only("precision") + "engine precision (default fp32, or the model's own)",
    )
    p.add_argument(
        "--batch-sizes",
        default="1,8,32",
        help=only("batch_sizes") + "profile min,opt,max batch (default 1,8,32)",
    )
    p.add_argument("--workspace-mb", type=int, default=4096, help=only("workspace_mb") + "builder workspace")
    p.add_argument(
        "--timing-cache",
        default=None,
        help=only("timing_cache") + "timing cache file, read if present and written after",
    )
    p.add_argument(
        "--calib-data",
        default=None,
        help=only("calib_data") + ".npz with array x (N,C,H,W), or 'digits' (its training split; "
        "default: synthetic images)",
    )
    p.add_argument(
        "--calib-size",
        type=int,
        default=64,
        help=only("calib_size") + "synthetic calibration samples (default 64)",
    )
    p.add_argument("--calib-batch", type=int, default=8, help=only("calib_batch") + "calibration batch size")
    p.add_argument(
        "--calib-cache",
        default=None,
        help=only("calib_cache") + "calibration cache file, read if present and written after",
    )
    p.add_argument(
        "--dynamic",
        action="store_true",
        help=only("dynamic") + "dynamic quantization (LSTM/Transformer models), no calibration",
    )
    p.add_argument("--per-tensor", action="store_true", help=only("per_channel") + "per-tensor weight scales")
    p.add_argument(
        "--target",
        default="cpu",
        choices=("cpu", "tensorrt"),
        help=only("target") + "Q/DQ flavour: cpu (u8 activations, s8 weights; default) or "
        "tensorrt (symmetric s8)",
    )
    p.add_argument(
        "--exclude-nodes",
        default=None,
        metavar="NAME[,NAME]",
        help=only("exclude_nodes") + "leave these nodes in float (names of the graph after "
        "quant_pre_process, as the per-layer error report prints them)",
    )
    p.add_argument(
        "--exclude-op-types",
        default=None,
        metavar="TYPE[,TYPE]",
        help=only("exclude_op_types") + "leave every node of these op types in float (e.g. Softmax)",
    )
    p.add_argument(
        "--quantize-op-types",
        default=None,
        metavar="TYPE[,TYPE]",
        help=only("quantize_op_types") + "quantize only nodes of these op types (e.g. Conv,MatMul,Gemm: the "
        "weighted layers), everything else stays float; default: every type "
        "ONNX Runtime's quantizer handles",
    )
    p.add_argument(
        "--float-tail",
        action=argparse.BooleanOptionalAction,
        default=field_default(BuildOptions, "float_tail"),
        help=only("float_tail") + "keep fixed-range ops (Softmax, Sigmoid, Tanh, ...) at the "
        "graph outputs in float",
    )
    p.add_argument(
        "--freeze",
        action=argparse.BooleanOptionalAction,
        default=field_default(BuildOptions, "freeze"),
        help="make initializers that are also graph inputs (old exporters) plain "
        "weights before building (default yes); --no-freeze keeps weights "
        "you feed at run time as inputs",
    )
    p.add_argument(
        "--keep-io-types",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=only("keep_io_types") + "keep float32 inputs and outputs (default yes)",
    )
    p.add_argument("--verify-batch-sizes", default="1,8", help="batch sizes the verifier runs (default 1,8)")
    p.add_argument("--seed", type=int, default=None, help="seed of the verification inputs")
    p.add_argument("--threads", type=int, default=None, help="intra-op threads")
    p.add_argument("--db", default=None, help="results database")
    p.add_argument("--json", dest="json_path", default=None, help="also write the record here")
    p.add_argument("--timeout", type=float, default=None, help="seconds for a TensorRT build cell")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    _add_input_group(p)


def _add_input_group(p) -> None:
    """The input options bench takes (``InputFields``): the verification and synthetic
    calibration inputs of a model with dynamic dimensions (a transformer's sequence)."""
    from dlbench.core import flags
    from dlbench.harness.bench.input_args import InputFields

    flags.add_arguments(p, InputFields)


def run(args: argparse.Namespace) -> int:
    from dlbench.converters.base import BuildOptions
    from dlbench.harness.convert.build import BuildRequest, build
    from dlbench.harness.convert.table import verification_table
    from dlbench.harness.output.progress import with_progress
    from dlbench.harness.verify import inputs as verify

    opts = BuildOptions(
        batch_sizes=verify.parse_batch_sizes(args.batch_sizes),
        workspace_mb=args.workspace_mb,
        timing_cache=args.timing_cache,
        calib_data=args.calib_data,
        calib_size=args.calib_size,
        calib_batch=args.calib_batch,
        calib_cache=args.calib_cache,
        dynamic=args.dynamic,
        per_channel=not args.per_tensor,
        target=args.target,
        keep_io_types=args.keep_io_types,
        exclude_nodes=_names(args.exclude_nodes),
        exclude_op_types=_names(args.exclude_op_types),
        quantize_op_types=_names(args.quantize_op_types),
        float_tail=args.float_tail,
        freeze=args.freeze,
    )
    from dlbench.core import flags
    from dlbench.harness.bench.input_args import InputFields

    req = BuildRequest(
        **flags.values(InputFields, args),
        source=args.model,
        to=args.to,
        out=args.out,
        options=opts,
        precision=args.precision,
        verify_batch_sizes=verify.parse_batch_sizes(args.verify_batch_sizes),
        seed=verify.VERIFY_SEED if args.seed is None else args.seed,
        threads=args.threads,
        db=args.db,
        json_path=args.json_path,
        timeout=args.timeout,
    )
    record = with_progress(args, f"build {args.to} from {args.model}", "build", lambda say: build(req))
    print(verification_table([record]))
    print_notes("build", record)
    if record["metrics"].get("layer_errors"):
        from dlbench.harness.verify.layers import layer_table

        print(layer_table(record["metrics"]["layer_errors"]))
    if record["status"] != "ok":
        print(f"dlbench build: {record['status']}: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1


def _names(text: str | None) -> tuple[str, ...]:
    """A comma-separated list of names as the request's tuple (blanks dropped)."""
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())
