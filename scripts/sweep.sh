#!/usr/bin/env bash
# Throughput sweep over a model file you already have: an ONNX file (any
# model, not only the zoo's) or a TensorRT engine that `dlbench build` wrote.
# One `dlbench bench` over backends x batch sizes x threads x scenarios, each
# cell in its own process; it prints the table and stores every cell.
#
# Run:
#   scripts/sweep.sh model.onnx
#   BATCH_SIZES=1,4,16,64 THREADS=1,2,4 scripts/sweep.sh model.onnx
#   SHAPES="input_ids=1x128 attention_mask=1x128" scripts/sweep.sh bert.onnx
#   SCENARIOS=server BATCH_SIZES=8 LATENCY_BOUND_MS=50 scripts/sweep.sh model.onnx
#   BACKENDS=tensorrt scripts/sweep.sh model.fp16.plan
# The file is $1 (or $MODEL_FILE); every other knob is an environment
# variable with its default below.  The command is printed before it runs.
# Helpers come from lib/common.sh next to this script (copy both).
# Exit status: 0 every cell ran; 1 a cell failed (stored with its reason);
# 2 bad input.
set -euo pipefail

MODEL_FILE=${1:-${MODEL_FILE:-}}               # model.onnx or model.plan (with its .json sidecar)
BACKENDS=${BACKENDS:-all}                      # comma list, or all = every available backend taking the file
DEVICE=${DEVICE:-}                             # cpu, cuda or ascend (empty: each backend's first device)
BATCH_SIZES=${BATCH_SIZES:-1,2,4,8,16,32,64}
THREADS=${THREADS:-}                           # intra-op threads, comma list sweeps (empty: physical cores)
SCENARIOS=${SCENARIOS:-offline}                # offline, single-stream, server (comma list)
SHAPES=${SHAPES:-}                             # NAME=AxBxC ... for inputs with dynamic dimensions
INT_RANGES=${INT_RANGES:-}                     # NAME=LOW:HIGH ... for integer inputs
QPS=${QPS:-}                                   # server: target rates (default: a ladder from capacity)
LATENCY_BOUND_MS=${LATENCY_BOUND_MS:-}         # server: find the highest rate with p99 within this
REPEATS=${REPEATS:-1}                          # fresh processes per cell; the median is reported
WARMUP=${WARMUP:-5}                            # warm-up iterations at least
MAX_WARMUP=${MAX_WARMUP:-100}                  # warm-up iterations at most
MIN_DURATION=${MIN_DURATION:-2}                # seconds measured at least per cell
ITERATIONS=${ITERATIONS:-}                     # measure exactly this many iterations instead
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}            # seconds per cell
BENCH_ARGS=${BENCH_ARGS:-}                     # any other `dlbench bench` options, word-split
WORKDIR=${WORKDIR:-runs/sweeps}                # the JSON of the cells goes here
DLBENCH=${DLBENCH:-dlbench}                    # the dlbench command
export DLBENCH_DB=${DLBENCH_DB:-results/dlbench.sqlite}  # the results database

# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

if [ -z "$MODEL_FILE" ]; then
    echo "usage: $0 MODEL.onnx|MODEL.plan   (knobs as environment variables: see the top of $0)" >&2
    exit 2
fi
if [ ! -f "$MODEL_FILE" ]; then
    echo "$0: $MODEL_FILE: no such file" >&2
    exit 2
fi

bench=(-b "$BACKENDS" --batch-sizes "$BATCH_SIZES" --scenario "$SCENARIOS" --repeats "$REPEATS"
       --warmup "$WARMUP" --max-warmup "$MAX_WARMUP" --min-duration "$MIN_DURATION"
       --timeout "$BENCH_TIMEOUT")
[ -z "$DEVICE" ] || bench+=(--device "$DEVICE")
[ -z "$THREADS" ] || bench+=(--threads "$THREADS")
[ -z "$ITERATIONS" ] || bench+=(--iterations "$ITERATIONS")
[ -z "$QPS" ] || bench+=(--qps "$QPS")
[ -z "$LATENCY_BOUND_MS" ] || bench+=(--latency-bound-ms "$LATENCY_BOUND_MS")
for s in $SHAPES; do bench+=(--shape "$s"); done
for r in $INT_RANGES; do bench+=(--int-range "$r"); done

mkdir -p "$WORKDIR"
name=$(basename "$MODEL_FILE")
JSON=$WORKDIR/${name%.*}.$(date -u +%Y%m%dT%H%M%SZ).json

step 1 1 "sweep $MODEL_FILE: backends $BACKENDS, batch sizes $BATCH_SIZES, threads ${THREADS:-default}, scenarios $SCENARIOS"
# shellcheck disable=SC2086
run_soft $DLBENCH bench "$MODEL_FILE" "${bench[@]}" --json "$JSON" $BENCH_ARGS
echo "    cells:    $JSON"
echo "    database: $DLBENCH_DB"
finish
