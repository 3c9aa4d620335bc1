# The chain every model script runs, sourced after the script has set its knobs
# (MODEL, FRAMEWORKS, BATCH_SIZE, ... see the top of scripts/resnet50.sh): the
# commands `dlbench run $MODEL --print-steps` prints, one dlbench command per
# step, each printed before it runs (DRY_RUN=1: printed only).
#   train   each framework of $FRAMEWORKS
#   export  every checkpoint to ONNX, verified against its framework
#   build   INT8 / FP16 ONNX (and TensorRT engines where TensorRT runs) from the
#           first framework's ONNX (or those of $BUILD_FRAMEWORKS)
#   bench   that ONNX, its builds and the native checkpoints over $BACKENDS
#   report  this run's tables
# tests/test_chain.py holds this file's commands equal to the run's plan
# (harness/pipeline/plan.py): change both, or copy this file to edit a step.

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

OUT=$WORKDIR/train/$MODEL
AVAILABLE=$(backends_here "$BACKENDS")
for p in $(words "$PRECISIONS"); do
    case "$p" in fp32|fp16|int8) ;; *) echo "PRECISIONS: unknown precision '$p' (fp32, fp16, int8)" >&2; exit 2 ;; esac
done
BUILD_FROM=${BUILD_FRAMEWORKS:-${FRAMEWORKS%%,*}}
TRT=""
[ "$TENSORRT" = off ] || TRT=$(pick_backends "$BACKENDS" "$AVAILABLE" engine)
case "$DEVICE" in gpu) BENCH_DEVICE=cuda ;; *) BENCH_DEVICE=$DEVICE ;; esac
inputs=$INPUT_ARGS
[ "$INPUT_ARGS" != auto ] || inputs=$(zoo_input_args "$MODEL")
threads=() tail=() iterations=()
[ -z "$THREADS" ] || threads=(--threads "$THREADS")
[ -z "$TIMEOUT" ] || tail=(--timeout "$TIMEOUT")
[ -z "$ITERATIONS" ] || iterations=(--iterations "$ITERATIONS")

for fw in $(words "$FRAMEWORKS"); do
    stage "train:$fw"
    # shellcheck disable=SC2086
    run_soft $DLBENCH train "$MODEL" --framework "$fw" --batch-size "$BATCH_SIZE" \
        --steps "$TRAIN_STEPS" --warmup-steps "$WARMUP_STEPS" --device "$DEVICE" \
        $TRAIN_ARGS --out "$WORKDIR/train" ${threads[@]+"${threads[@]}"} ${tail[@]+"${tail[@]}"}
done

for fw in $(words "$FRAMEWORKS"); do
    stage "export:$fw"
    present "$OUT/$fw/manifest.json" || { note "no $fw checkpoint in $OUT/$fw"; continue; }
    # shellcheck disable=SC2086
    run_soft $DLBENCH export "$OUT/$fw" ${threads[@]+"${threads[@]}"} $EXPORT_ARGS \
        ${tail[@]+"${tail[@]}"}
done

measured=()          # what the bench step measures: fp32 ONNX, its builds, checkpoints
for fw in $(words "$BUILD_FROM"); do
    src=$OUT/$fw/model.onnx
    present "$src" || { note "no $src to build from"; continue; }
    measured+=("$src")
    for p in int8 fp16; do
        case ",$PRECISIONS," in *",$p,"*) ;; *) continue ;; esac
        stage "build:$p"
        extra=()
        [ "$p" != int8 ] || read -ra extra <<< "$INT8_ARGS"
        # shellcheck disable=SC2086
        run_soft $DLBENCH build "$src" --to "$p" ${extra[@]+"${extra[@]}"} \
            ${threads[@]+"${threads[@]}"} $BUILD_ARGS ${tail[@]+"${tail[@]}"}
        measured+=("$OUT/$fw/model.$p.onnx")
    done
    for p in $(words "$PRECISIONS"); do
        stage "build:tensorrt-$p"
        [ -n "$TRT" ] || { note "skipped: TensorRT does not run here (or TENSORRT=off)"; continue; }
        # shellcheck disable=SC2086
        run_try $DLBENCH build "$src" --to tensorrt --precision "$p" --batch-sizes "$BATCH_SIZES" \
            ${threads[@]+"${threads[@]}"} $BUILD_ARGS ${tail[@]+"${tail[@]}"}
        measured+=("$OUT/$fw/model.$p.plan")
    done
done
for fw in $(words "$FRAMEWORKS"); do
    measured+=("$OUT/$fw")
done

stage "bench"
files=()
for f in "${measured[@]}"; do
    if ! taken "$f" "$BACKENDS"; then continue; fi
    if present "$f"; then files+=("$f"); else note "no $f (its step failed)"; fi
done
[ "${#files[@]}" -gt 0 ] || { echo "nothing to benchmark: no step produced a file" >&2; exit 1; }
# shellcheck disable=SC2086
run_soft $DLBENCH bench "${files[@]}" -b "$BACKENDS" --device "$BENCH_DEVICE" \
    --batch-sizes "$BATCH_SIZES" --warmup "$WARMUP" --max-warmup "$MAX_WARMUP" \
    --min-iterations "$MIN_ITERATIONS" --min-duration "$MIN_DURATION" \
    ${iterations[@]+"${iterations[@]}"} ${threads[@]+"${threads[@]}"} $BENCH_ARGS \
    ${tail[@]+"${tail[@]}"} $inputs

stage "report"
echo "    database: $DLBENCH_DB (run $DLBENCH_RUN_ID)"
echo "    files:    $OUT/<framework>/ (checkpoints, model*.onnx, engines)"
run_soft $DLBENCH report --run "$DLBENCH_RUN_ID" --format md
finish
