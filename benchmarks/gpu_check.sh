#!/usr/bin/env bash
# The GPU issue's checks on an NVIDIA machine, in stages, each step logged and timed
# apart so one failure costs that step only (device time is scarce: run the stages
# that belong together in one call).
#
#   benchmarks/gpu_check.sh OUTDIR STAGE...
#
# Stages:
#   setup     install dlbench (core, no TensorFlow or MindSpore) next to the machine's
#             PyTorch CUDA build; dlbench --help / env / backends
#   peak      dlbench env --peak (cuBLAS fp32, tf32, fp16, bf16), stored where micro reads it
#   tests     every gpu-marked test that needs no TensorFlow, MindSpore or TensorRT
#   chain     dlbench run on a model by name with --device gpu: train, export, fp16
#             build and bench on cuda, one command
#   micro     micro gemm|conv|memory and layer on cuda, against the CPU reference
#   gemm      micro gemm alone (its % of the peak the peak stage stored)
#   train     train resnet50 on the GPU, fp32 and amp, --devices 1 (NCCL), and the
#             harness against a plain training loop
#   amp       the amp training overhead alone, longer and with more pairs
#   bench     bench resnet50 on cuda: eager and CUDA graph at batch 1, 8, 32, 128, each
#             against a plain loop; fp32 against tf32 and fp16
#   compile   bench resnet50 --compile against a plain torch.compile loop, at
#             COMPILE_BATCHES (default 1,8,32,128)
#   ort       onnxruntime-gpu (ORT_WHEEL_TAR: the wheel's files, tar.xz): install,
#             its gpu tests, I/O binding on and off against plain loops, the
#             silent-fallback check
#   ortquick  the same install, its gpu tests and the silent-fallback check alone
#
# PY (default python3) is the interpreter that holds the CUDA build of PyTorch.
# Short windows mislead here: eager ResNet-50 at batch 1 read 0.64 of the plain loop over
# 50 iterations and 0.976 over 300 (H200, 2026-11-26), hence the iteration counts below.
set -u
OUTDIR=${1:?usage: gpu_check.sh OUTDIR STAGE...}
shift
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
LOGS=/tmp/gpu-check
mkdir -p "$OUTDIR" "$LOGS"
DL=("$PY" -m dlbench.harness)
FAST=(--warmup 5 --min-iterations 30 --min-duration 0.5)

step() { # NAME SECONDS COMMAND...: run, log to $LOGS/NAME.log, one summary line
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s%N)
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    printf '%-28s rc=%-3s %6ss\n' "$name" "$rc" "$((($(date +%s%N) - start) / 1000000000))" |
        tee -a "$OUTDIR/summary.txt"
    # Straight into OUTDIR, so a call stopped at its limit still brings back what ran.
    { printf '\n===== %s (rc=%s)\n' "$name" "$rc"; tail -c 20000 "$LOGS/$name.log"; } >>"$OUTDIR/logs.txt"
    return $rc
}

setup() {
    step gpu 60 sh -c "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; \
        $PY -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'"
    # Dependencies resolved from what is installed (no index): the core must install
    # on its own, with no TensorFlow or MindSpore.
    step install 180 "$PY" -m pip install --no-index --no-build-isolation --no-cache-dir . ||
        step install-nodeps 120 "$PY" -m pip install --no-index --no-build-isolation --no-deps .
    step help 60 "${DL[@]}" --help
    step lazy 60 "$PY" -c 'import sys, subprocess
subprocess.run([sys.executable, "-m", "dlbench.harness", "env"], check=True)
import dlbench.harness.cli as c
heavy = [m for m in ("torch", "tensorflow", "mindspore", "tensorrt") if m in sys.modules]
print("frameworks imported by the CLI module:", heavy or "none"); sys.exit(bool(heavy))'
    step backends 60 "${DL[@]}" backends
}

DB=$LOGS/results.sqlite
peak() { step peak 240 "${DL[@]}" env --peak --peak-seconds 1 --db "$DB"; }

tests() {
    # test_training.py holds every framework's GPU cases: PyTorch's only here.
    step pytest-gpu 420 "$PY" -m pytest -p no:cacheprovider -q -rs -m "gpu and not (tensorflow or mindspore)" -n 4 \
        tests/harness/bench/test_bench_gpu.py tests/harness/micro/test_micro_layers.py tests/harness/training/test_train_scaling.py \
        tests/harness/training/test_training.py tests/harness/convert/test_convert_build.py tests/models/test_hub_models.py
}

chain() {
    step run-chain 300 "${DL[@]}" run timm:resnet18 --device gpu --backends pytorch,onnxruntime \
        --precisions fp16 --batch-sizes 1,32 --workdir "$LOGS/chain" --db "$DB"
}

gemm() {
    step micro-gemm 180 "${DL[@]}" micro gemm --device cuda --engine pytorch \
        --shape 8192 --precision fp32,tf32,fp16,bf16 "${FAST[@]}" --json "$LOGS/micro-gemm.json" --db "$DB"
}

micro() {
    local db=$DB
    gemm
    step micro-conv 180 "${DL[@]}" micro conv --device cuda --engine pytorch \
        --shape 32x64x56x56:64k3 --precision fp32,tf32 "${FAST[@]}" --json "$LOGS/micro-conv.json" --db "$db"
    step micro-memory 120 "${DL[@]}" micro memory --device cuda --engine pytorch \
        --shape 1024 "${FAST[@]}" --json "$LOGS/micro-memory.json" --db "$db"
    step layer 300 "${DL[@]}" layer conv --shape 32x64x56x56:64k3,32x256x56x56:64k1 --engine pytorch \
        --device cuda --mode forward,train "${FAST[@]}" --json "$LOGS/layer.json" --db "$db"
}

train() {
    local db=$LOGS/train.sqlite
    # fp32 and amp runs of dlbench train are the harness side of the overhead runs below.
    step train-devices1 300 "${DL[@]}" train resnet50 -f pytorch --device gpu --batch-size 64 \
        --steps 60 --devices 1 --out "$LOGS/runs" --db "$db"
    for p in fp32 amp; do
        step "train-overhead-$p" 300 "$PY" benchmarks/train_overhead.py --frameworks pytorch \
            --device gpu --precision "$p" --model resnet50 --batch-size 64 --steps 60 \
            --warmup-steps 5 --repeats 2 --json "$LOGS/train-overhead-$p.json"
    done
}

bench() {
    for mode in eager graph; do
        step "bench-overhead-$mode" 300 "$PY" benchmarks/gpu_overhead.py --backend pytorch \
            --mode "$mode" --batch-sizes 1,8,32,128 --warmup 20 --iterations 300 --rounds 1 \
            --json "$LOGS/bench-overhead-$mode.json"
    done
    step bench-precisions 300 "${DL[@]}" bench resnet50 -b pytorch --device cuda --batch-sizes 32 \
        --precision fp32 --precision tf32 --precision fp16 "${FAST[@]}" \
        --json "$LOGS/bench-precisions.json"
}

amp() {
    step train-overhead-amp 300 "$PY" benchmarks/train_overhead.py --frameworks pytorch \
        --device gpu --precision amp --model resnet50 --batch-size 64 --steps 150 \
        --warmup-steps 10 --repeats 3 --json "$LOGS/train-overhead-amp.json"
}

compile() {
    step bench-overhead-compile "${COMPILE_LIMIT:-400}" "$PY" benchmarks/gpu_overhead.py \
        --backend pytorch --mode compile --batch-sizes "${COMPILE_BATCHES:-1,8,32,128}" --warmup 20 \
        --iterations 300 --rounds 1 --json "$LOGS/bench-overhead-compile.json"
}

ort_install() {
    if ! "$PY" -c 'import importlib.metadata as m; m.version("onnxruntime-gpu")' 2>/dev/null; then
        mkdir -p /tmp/ortgpu && xz -dc "${ORT_WHEEL_TAR:?}" | tar xf - -C /tmp/ortgpu &&
            (cd /tmp/ortgpu && "$PY" -m zipfile -c /tmp/onnxruntime_gpu-1.31.1-cp312-cp312-linux_x86_64.whl \
                onnxruntime onnxruntime_gpu-1.31.1.dist-info) &&
            "$PY" -m pip uninstall -y onnxruntime >"$LOGS/ort-uninstall.log" 2>&1
        step ort-install 180 "$PY" -m pip install --no-index --no-deps --no-cache-dir \
            /tmp/onnxruntime_gpu-1.31.1-cp312-cp312-linux_x86_64.whl
    fi
    step ort-providers 60 "$PY" -c 'import onnxruntime as o; o.preload_dlls(); print(o.__version__, o.get_available_providers())'
    step ort-backends 60 "${DL[@]}" backends
    step pytest-ort 300 "$PY" -m pytest -p no:cacheprovider -q -rs -m gpu tests/harness/bench/test_bench_gpu.py -k onnxruntime
}

ortquick() { # the CUDA provider's install, its gpu test and the silent-fallback check only
    ort_install
    step ort-fallback 120 "$PY" benchmarks/gpu_fallback.py "$LOGS"
}

ort() {
    ort_install
    local onnx=$LOGS/resnet50.onnx
    [ -f "$onnx" ] || step export-resnet50 180 "$PY" benchmarks/bench_overhead.py --model resnet50 --export "$onnx"
    for mode in iobinding host; do
        step "ort-overhead-$mode" 300 "$PY" benchmarks/gpu_overhead.py --backend onnxruntime \
            --model "$onnx" --mode "$mode" --batch-sizes 1,8,32,128 --warmup 10 --iterations 200 \
            --rounds 1 --json "$LOGS/ort-overhead-$mode.json"
    done
    step ort-precisions 300 "${DL[@]}" bench "$onnx" -b onnxruntime --device cuda --batch-sizes 32 \
        --precision fp32 --precision tf32 "${FAST[@]}" --json "$LOGS/ort-precisions.json"
    step ort-fallback 120 "$PY" benchmarks/gpu_fallback.py "$LOGS"
}

for stage in "$@"; do
    echo "== stage $stage $(date +%T)" | tee -a "$OUTDIR/summary.txt"
    "$stage"
done
# What comes back: the summary, the logs (written as each step ends) and the results.
tar czf "$OUTDIR/results.tgz" -C "$LOGS" $(cd "$LOGS" && ls *.json *.sqlite 2>/dev/null) 2>/dev/null
exit 0
