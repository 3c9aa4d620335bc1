#!/usr/bin/env bash
# Your own checkpoint to verified ONNX, INT8 and FP16 files, with dlbench:
#   1. export it to fp32 ONNX, verified against its framework
#   2. build INT8 and FP16 ONNX from that file (and TensorRT engines when
#      `dlbench backends` says TensorRT runs here), each verified against it
#   3. `dlbench verify` each file against the checkpoint itself, end to end
#   4. print one verification table of all of them
#
# Run:
#   scripts/convert.sh runs/resnet50/pytorch                 # a `dlbench train` output
#   ARCH=resnet50 scripts/convert.sh my_weights.pt           # a bare checkpoint: name its zoo model
#   ARCH=resnet50 FRAMEWORK=pytorch OUT=out/r50.onnx scripts/convert.sh weights.bin
# The checkpoint is $1 (or $CHECKPOINT); every other knob is an environment
# variable with its default below.  Each command is printed before it runs.
# Helpers come from lib/common.sh next to this script (copy both).
# Exit status: 0 everything verified; 1 a file is over tolerance or a step
# failed (stored in the database, the script went on); 2 bad input.
set -euo pipefail

CHECKPOINT=${1:-${CHECKPOINT:-}}               # train output directory, manifest.json, .pt/.keras/.ckpt
ARCH=${ARCH:-}                                 # zoo model of a bare checkpoint (dlbench export --model)
FRAMEWORK=${FRAMEWORK:-}                       # framework of a bare checkpoint, if its suffix does not say
OUT=${OUT:-}                                   # the fp32 ONNX file (default: model.onnx next to the checkpoint)
PRECISIONS=${PRECISIONS:-fp32,fp16,int8}       # files to make and verify
INT8_ARGS=${INT8_ARGS:-}                       # e.g. --calib-data calib.npz, or --dynamic for LSTM/BERT
TENSORRT=${TENSORRT:-auto}                     # auto: also build engines where TensorRT runs; off: never
TRT_BATCH_SIZES=${TRT_BATCH_SIZES:-1,8,32}     # TensorRT profile: min,opt,max batch
VERIFY_BATCH_SIZES=${VERIFY_BATCH_SIZES:-1,8}  # batch sizes every verification runs
EXPORT_ARGS=${EXPORT_ARGS:-}                   # extra options for each command, word-split
BUILD_ARGS=${BUILD_ARGS:-}
VERIFY_ARGS=${VERIFY_ARGS:-}
DLBENCH=${DLBENCH:-dlbench}                    # the dlbench command
export DLBENCH_DB=${DLBENCH_DB:-results/dlbench.sqlite}  # the results database

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

if [ -z "$CHECKPOINT" ]; then
    echo "usage: [ARCH=MODEL] $0 CHECKPOINT   (a dlbench train output or a .pt/.keras/.ckpt)" >&2
    exit 2
fi
if [ ! -e "$CHECKPOINT" ]; then
    echo "$0: $CHECKPOINT: no such file or directory" >&2
    exit 2
fi
for p in $(words "$PRECISIONS"); do
    case "$p" in fp32|fp16|int8) ;; *) echo "PRECISIONS: unknown precision '$p' (fp32, fp16, int8)" >&2; exit 2 ;; esac
done
if [ -z "$OUT" ]; then
    if [ -d "$CHECKPOINT" ]; then OUT=$CHECKPOINT/model.onnx; else OUT=$(dirname "$CHECKPOINT")/model.onnx; fi
fi
STEM=${OUT%.onnx}
source_args=()                                 # what tells dlbench how to read a bare checkpoint
[ -z "$ARCH" ] || source_args+=(--model "$ARCH")
[ -z "$FRAMEWORK" ] || source_args+=(--framework "$FRAMEWORK")
TRT=""
[ "$TENSORRT" = off ] || TRT=$(pick_backends all "$(backends_here)" engine)

step 1 4 "export $CHECKPOINT to ONNX, verified against its framework"
# shellcheck disable=SC2086
run_soft $DLBENCH export "$CHECKPOINT" ${source_args[@]+"${source_args[@]}"} --out "$OUT" \
    --verify-batch-sizes "$VERIFY_BATCH_SIZES" --json "$STEM.export.json" $EXPORT_ARGS
[ -f "$OUT" ] || { echo "export wrote no $OUT" >&2; exit 1; }

step 2 4 "build ${PRECISIONS} files from $OUT${TRT:+ (TensorRT engines too)}"
files=()
case ",$PRECISIONS," in *,fp32,*) files+=("$OUT") ;; esac
for p in $(words "$PRECISIONS"); do
    if [ "$p" != fp32 ]; then
        extra=()
        # shellcheck disable=SC2206
        [ "$p" != int8 ] || extra=($INT8_ARGS)
        # shellcheck disable=SC2086
        run_soft $DLBENCH build "$OUT" --to "$p" ${extra[@]+"${extra[@]}"} \
            --verify-batch-sizes "$VERIFY_BATCH_SIZES" --json "$STEM.$p.build.json" $BUILD_ARGS
        [ ! -f "$STEM.$p.onnx" ] || files+=("$STEM.$p.onnx")
    fi
    if [ -n "$TRT" ]; then
        # shellcheck disable=SC2086
        run_try $DLBENCH build "$OUT" --to tensorrt --precision "$p" --batch-sizes "$TRT_BATCH_SIZES" \
            --timing-cache "$(dirname "$OUT")/trt.timing.cache" \
            --verify-batch-sizes "$VERIFY_BATCH_SIZES" --json "$STEM.$p.plan.build.json" $BUILD_ARGS
        [ ! -f "$STEM.$p.plan" ] || files+=("$STEM.$p.plan")
    fi
done

step 3 4 "verify every file against the checkpoint itself"
reports=()
for f in "${files[@]}"; do
    # shellcheck disable=SC2086
    run_soft $DLBENCH verify "$CHECKPOINT" "$f" ${source_args[@]+"${source_args[@]}"} \
        --batch-sizes "$VERIFY_BATCH_SIZES" --json "$f.verify.json" $VERIFY_ARGS
    [ ! -f "$f.verify.json" ] || reports+=("$f.verify.json")
done

step 4 4 "verification table: each file against $CHECKPOINT"
# The verify records' JSON, one row per file and output (stdlib only).
python3 - ${reports[@]+"${reports[@]}"} <<'PY'
import json, sys

def short(text, limit=70):
    return text if len(text) <= limit else text[:limit - 3] + "..."

def fmt(x, spec):
    return "" if x is None else format(x, spec)

rows = [("File", "Precision", "Output", "Max abs", "Cosine (min)", "Top-1", "Verdict")]
for path in sys.argv[1:]:
    with open(path) as fh:
        data = json.load(fh)
    for rec in data if isinstance(data, list) else [data]:
        cand = (rec.get("context") or {}).get("candidate") or {}
        verdict = (rec.get("metrics") or {}).get("verdict") or {}
        outputs = (rec.get("metrics") or {}).get("outputs") or {"": {}}
        for name, o in outputs.items():
            top1 = o.get("top1")
            rows.append((cand.get("path", path[:-len(".verify.json")]), rec.get("precision") or "",
                         name, fmt(o.get("max_abs"), ".3g"), fmt(o.get("cosine"), ".6f"),
                         "" if top1 is None else f"{100 * top1:.1f}%",
                         rec.get("status", "") + (": " + short(rec["error"]) if rec.get("error") else "")))
widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
for n, r in enumerate(rows):
    print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")
    if n == 0:
        print("| " + " | ".join("-" * w for w in widths) + " |")
PY
echo "    database: $DLBENCH_DB"
finish
