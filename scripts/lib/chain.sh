# The chain every model script runs, sourced after the script has set its knobs
# (MODEL, FRAMEWORKS, BATCH_SIZE, ... see scripts/resnet50.sh): five steps, each
# a dlbench command printed before it runs.
#   1. dlbench train   each framework of $FRAMEWORKS
#   2. dlbench export  every checkpoint to ONNX, verified against its framework
#   3. dlbench build   INT8 / FP16 ONNX (and TensorRT engines where TensorRT runs)
#   4. dlbench bench   ONNX files, engines and native checkpoints over $BACKENDS
#   5. dlbench report  this run's tables
# To change a step for one model, copy this file next to its script and edit it.

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

OUT=$WORKDIR/$MODEL
AVAILABLE=$(backends_here "$BACKENDS")
for p in $(words "$PRECISIONS"); do
    case "$p" in fp32|fp16|int8) ;; *) echo "PRECISIONS: unknown precision '$p' (fp32, fp16, int8)" >&2; exit 2 ;; esac
done
case ",$PRECISIONS," in *,fp32,*) WITH_FP32=1 ;; *) WITH_FP32=0 ;; esac
TRT=""
[ "$TENSORRT" = off ] || TRT=$(pick_backends "$BACKENDS" "$AVAILABLE" engine)
inputs=$INPUT_ARGS
[ "$INPUT_ARGS" != auto ] || inputs=$(zoo_input_args "$MODEL")

mkdir -p "$OUT"
step 1 5 "train $MODEL in $FRAMEWORKS"
train=(--framework "$FRAMEWORKS" --batch-size "$BATCH_SIZE" --steps "$TRAIN_STEPS"
       --warmup-steps "$WARMUP_STEPS" --device "$TRAIN_DEVICE" --out "$WORKDIR" --json "$OUT/train.json")
[ -z "$TRAIN_THREADS" ] || train+=(--threads "$TRAIN_THREADS")
# shellcheck disable=SC2086
run_soft $DLBENCH train "$MODEL" "${train[@]}" $TRAIN_ARGS

step 2 5 "export each checkpoint to ONNX, verified against its framework"
checkpoints=()
for fw in $(words "$FRAMEWORKS"); do
    if [ -f "$OUT/$fw/manifest.json" ]; then checkpoints+=("$OUT/$fw"); else note "no $fw checkpoint in $OUT/$fw"; fi
done
[ "${#checkpoints[@]}" -gt 0 ] || { echo "no checkpoint to export" >&2; exit 1; }
# shellcheck disable=SC2086
run_soft $DLBENCH export "${checkpoints[@]}" --json "$OUT/export.json" $EXPORT_ARGS

step 3 5 "build ${PRECISIONS} files from the fp32 ONNX of $BUILD_FRAMEWORKS${TRT:+ (TensorRT engines too)}"
onnx_files=() engines=()
for fw in $(words "$FRAMEWORKS"); do
    [ -f "$OUT/$fw/model.onnx" ] || { note "no $OUT/$fw/model.onnx"; continue; }
    [ "$WITH_FP32" = 0 ] || onnx_files+=("$OUT/$fw/model.onnx")
    case ",$BUILD_FRAMEWORKS," in *",$fw,"*) ;; *) continue ;; esac
    for p in $(words "$PRECISIONS"); do
        extra=()
        [ "$p" != int8 ] || extra=($INT8_ARGS)
        if [ "$p" != fp32 ]; then
            # shellcheck disable=SC2086
            run_soft $DLBENCH build "$OUT/$fw/model.onnx" --to "$p" ${extra[@]+"${extra[@]}"} \
                --json "$OUT/$fw/build.$p.json" $BUILD_ARGS
            [ ! -f "$OUT/$fw/model.$p.onnx" ] || onnx_files+=("$OUT/$fw/model.$p.onnx")
        fi
        if [ -n "$TRT" ]; then
            # shellcheck disable=SC2086
            run_try $DLBENCH build "$OUT/$fw/model.onnx" --to tensorrt --precision "$p" \
                --batch-sizes "$BATCH_SIZES" --timing-cache "$OUT/trt.timing.cache" \
                --json "$OUT/$fw/build.tensorrt.$p.json" $BUILD_ARGS
            [ ! -f "$OUT/$fw/model.$p.plan" ] || engines+=("$OUT/$fw/model.$p.plan")
        fi
    done
done

step 4 5 "benchmark over backends '$BACKENDS', batch sizes $BATCH_SIZES"
bench=(--batch-sizes "$BATCH_SIZES" --scenario "$SCENARIOS" --warmup "$WARMUP"
       --max-warmup "$MAX_WARMUP" --min-duration "$MIN_DURATION" --timeout "$BENCH_TIMEOUT")
[ -z "$ITERATIONS" ] || bench+=(--iterations "$ITERATIONS")
[ -z "$THREADS" ] || bench+=(--threads "$THREADS")
# shellcheck disable=SC2206
bench+=($inputs)
b=$(pick_backends "$BACKENDS" "$AVAILABLE" onnx)
if [ -n "$b" ] && [ "${#onnx_files[@]}" -gt 0 ]; then
    echo "--- ONNX files on $b"
    # shellcheck disable=SC2086
    run_soft $DLBENCH bench "${onnx_files[@]}" -b "$b" "${bench[@]}" --json "$OUT/bench.onnx.json" $BENCH_ARGS
fi
if [ -n "$TRT" ] && [ "${#engines[@]}" -gt 0 ]; then
    echo "--- TensorRT engines"
    # shellcheck disable=SC2086
    run_soft $DLBENCH bench "${engines[@]}" -b "$TRT" "${bench[@]}" --json "$OUT/bench.tensorrt.json" $BENCH_ARGS
fi
native=() kinds=()
for fw in $(words "$FRAMEWORKS"); do
    if [ -f "$OUT/$fw/manifest.json" ]; then native+=("$OUT/$fw"); kinds+=("$fw"); fi
done
b=""
[ "${#kinds[@]}" -eq 0 ] || b=$(pick_backends "$BACKENDS" "$AVAILABLE" "${kinds[@]}")
if [ -n "$b" ]; then
    echo "--- native checkpoints on $b"
    # shellcheck disable=SC2086
    run_soft $DLBENCH bench "${native[@]}" -b "$b" "${bench[@]}" --json "$OUT/bench.native.json" $BENCH_ARGS
fi

step 5 5 "results"
echo "    database:    $DLBENCH_DB (run $DLBENCH_RUN_ID)"
echo "    files:       $OUT/<framework>/ (checkpoints, model*.onnx, engines)"
echo "    JSON:        $(cd "$OUT" && ls -- *.json */build.*.json 2>/dev/null | tr '\n' ' ')"
# The run's records as the published tables (training, conversion, inference).
run_soft $DLBENCH report --run "$DLBENCH_RUN_ID" --format md
finish
