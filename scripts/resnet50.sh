#!/usr/bin/env bash
# ResNet-50 v1.5 end to end with the dlbench CLI, one step at a time:
#   1. train briefly in each framework of $FRAMEWORKS (native training throughput)
#   2. export every checkpoint to ONNX, verified against its framework
#   3. build INT8 and FP16 ONNX from the fp32 ONNX (and TensorRT engines when
#      `dlbench backends` says TensorRT runs here), each verified
#   4. benchmark the ONNX files, the engines and the native checkpoints over
#      $BACKENDS and $BATCH_SIZES
#   5. say where the results are and print this run's `dlbench report`
#
# Run it from anywhere dlbench is installed:
#   scripts/resnet50.sh
#   MODEL=resnet50-mini FRAMEWORKS=pytorch BATCH_SIZES=1,8 scripts/resnet50.sh
# Every knob is an environment variable with its default just below; copy the
# script (with lib/common.sh, its helpers) and edit it freely.  Each command is
# printed before it runs.
# Exit status: 0 all ran; 1 something failed at run time (stored in the
# database, the script went on); 2 bad input.
#
# dlbench-models: resnet50 resnet50-mini
set -euo pipefail

MODEL=${MODEL:-resnet50}                       # one of the dlbench-models above
FRAMEWORKS=${FRAMEWORKS:-pytorch,tensorflow,mindspore}
BATCH_SIZE=${BATCH_SIZE:-16}                   # training batch
TRAIN_STEPS=${TRAIN_STEPS:-6}                  # measured training steps
WARMUP_STEPS=${WARMUP_STEPS:-2}                # training steps before the clock
TRAIN_DEVICE=${TRAIN_DEVICE:-cpu}              # cpu, gpu or ascend
TRAIN_THREADS=${TRAIN_THREADS:-}               # intra-op threads for training (empty: physical cores)
PRECISIONS=${PRECISIONS:-fp32,fp16,int8}       # ONNX files (and TensorRT engines) to build and measure
BUILD_FRAMEWORKS=${BUILD_FRAMEWORKS:-$FRAMEWORKS}  # whose fp32 ONNX gets the INT8/FP16/TensorRT builds
INT8_ARGS=${INT8_ARGS:-}                       # extra `dlbench build --to int8` options (e.g. --calib-data x.npz)
TENSORRT=${TENSORRT:-auto}                     # auto: build and measure engines where TensorRT runs; off: never
BACKENDS=${BACKENDS:-all}                      # comma list, or all = every available backend
BATCH_SIZES=${BATCH_SIZES:-1,8,32}             # inference batch sizes (also the TensorRT profile)
THREADS=${THREADS:-}                           # inference intra-op threads, comma list sweeps (empty: physical cores)
SCENARIOS=${SCENARIOS:-offline}                # offline, single-stream, server
WARMUP=${WARMUP:-5}                            # warm-up iterations at least
MAX_WARMUP=${MAX_WARMUP:-100}                  # warm-up iterations at most
MIN_DURATION=${MIN_DURATION:-2}                # seconds measured at least per cell
ITERATIONS=${ITERATIONS:-}                     # measure exactly this many iterations instead
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}            # seconds per bench cell
TRAIN_ARGS=${TRAIN_ARGS:-}                     # extra options for each command, word-split
EXPORT_ARGS=${EXPORT_ARGS:-}
BUILD_ARGS=${BUILD_ARGS:-}
BENCH_ARGS=${BENCH_ARGS:-}
INPUT_ARGS=${INPUT_ARGS:-}                     # bench --shape/--int-range options; auto: from the zoo's input spec
WORKDIR=${WORKDIR:-runs}                       # checkpoints and files go to $WORKDIR/$MODEL/FRAMEWORK/
DLBENCH=${DLBENCH:-dlbench}                    # the dlbench command
export DLBENCH_DB=${DLBENCH_DB:-results/dlbench.sqlite}  # the results database

# The chain itself is the same for every model: scripts/lib/chain.sh, five steps,
# each a dlbench command printed before it runs (copy it with this script to edit a step).
# shellcheck source=lib/chain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/chain.sh"
