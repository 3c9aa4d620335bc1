# Helpers sourced by the scripts in scripts/: printing each step and the exact
# command before it runs, deciding which failures stop a script, and asking
# dlbench (never guessing) which backends this machine has.  Nothing here runs
# a benchmark by itself; the scripts read top to bottom as the chain they run.
#
# Expects $DLBENCH (the dlbench command, may be several words such as
# "python -m dlbench.harness") to be set by the sourcing script.

# Every step's records share one run id, so `dlbench report --run` shows this
# script's run and nothing else (export DLBENCH_RUN_ID yourself to choose it).
export DLBENCH_RUN_ID=${DLBENCH_RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-sh$(printf '%04x' $$)}

# step N TOTAL TEXT: a header a person can follow in a long log.
step() {
    printf '\n==> [%s/%s] %s\n' "$1" "$2" "$3"
}

# stage NAME: a header named as `dlbench run` names its stage (train:pytorch, ...).
stage() {
    printf '\n==> %s\n' "$1"
}

# note TEXT: something the script decided (a skipped backend, a missing file).
note() {
    printf '    note: %s\n' "$*"
}

# shell_word WORD: WORD as a shell reads it back, quoted only where needed (as
# Python's shlex.quote, so a command reads the same as `dlbench run --print-steps`).
shell_word() {
    if [[ $1 =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
        printf '%s' "$1"
    else
        printf "'%s'" "${1//\'/\'\"\'\"\'}"
    fi
}

# run CMD...: print the command as it can be pasted back into a shell, then run
# it (with DRY_RUN set: only print it).
run() {
    printf '    $'
    local w
    for w in "$@"; do printf ' '; shell_word "$w"; done
    printf '\n'
    [ -z "${DRY_RUN:-}" ] || return 0
    "$@"
}

# present PATH: whether a step left PATH (always, with DRY_RUN: nothing ran).
present() {
    [ -n "${DRY_RUN:-}" ] || [ -e "$1" ]
}

# taken PATH WANTED: whether a wanted backend (comma list, or all) measures PATH,
# by its kind (harness/pipeline/stages.py _format and each backend's formats).
taken() {
    local kind b
    case "$1" in
        *.onnx) kind="onnxruntime tensorrt" ;;
        *.plan) kind="tensorrt" ;;
        *) kind=$(takers "$(basename "$1")") ;;
    esac
    [ "$2" != all ] || return 0
    for b in $kind; do
        case ",$2," in *",$b,"*) return 0 ;; esac
    done
    return 1
}

# run_soft CMD...: like run, but exit status 1 does not stop the script.
# dlbench exits 1 when a run failed at run time (a crashed cell, a file over
# tolerance) and has already stored that failure with its reason; the other
# cells and steps are still worth running.  Exit 2 (bad input) and anything
# else still stop the script.  The script ends with status 1 if any happened.
SOFT_FAILURES=0
run_soft() {
    local rc=0
    run "$@" || rc=$?
    if [ "$rc" -eq 1 ]; then
        SOFT_FAILURES=$((SOFT_FAILURES + 1))
        note "exit status 1: the failure is stored in the results database; going on"
    elif [ "$rc" -ne 0 ]; then
        exit "$rc"
    fi
}

# run_try CMD...: like run, but no exit status stops the script (it still
# counts as a failure).  For optional extras such as TensorRT engines, which a
# model can be unable to have (e.g. a dynamic sequence length) even where
# TensorRT runs.
run_try() {
    local rc=0
    run "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then
        SOFT_FAILURES=$((SOFT_FAILURES + 1))
        note "exit status $rc; going on without it"
    fi
}

# words CSV: a comma-separated knob as words for a for-loop.
words() {
    printf '%s\n' "${1//,/ }"
}

# backends_here [WANTED]: the backends `dlbench backends --json` says run
# here, as words.  WANTED (a comma list, or "all") is checked against every
# backend dlbench knows: a misspelt name is bad input (one line, exit 2), not
# a benchmark that silently measures nothing.
backends_here() {
    # shellcheck disable=SC2086
    $DLBENCH backends --json | python3 -c '
import json, sys
known = json.load(sys.stdin)
names = [b["name"] for b in known]
wanted = [w for w in sys.argv[1].split(",") if w and w != "all"]
unknown = [w for w in wanted if w not in names]
if unknown:
    print("BACKENDS: unknown backend %s; dlbench knows: %s" % (", ".join(unknown), ", ".join(names)),
          file=sys.stderr)
    sys.exit(2)
print(" ".join(b["name"] for b in known if b["available"]))
' "${1:-all}"
}

# takers KIND: the backends that measure one kind of file.  ONNX files go to
# ONNX Runtime; TensorRT measures the engines `dlbench build --to tensorrt`
# made (so an ONNX file is not rebuilt inside every TensorRT cell); a native
# checkpoint goes to its own framework (and TensorFlow's also to cpu-mkl,
# MindSpore's also to an Ascend NPU).
takers() {
    case "$1" in
        onnx) echo "onnxruntime" ;;
        engine) echo "tensorrt" ;;
        pytorch) echo "pytorch" ;;
        tensorflow) echo "tensorflow cpu-mkl" ;;
        mindspore) echo "mindspore ascend" ;;
        *) echo "" ;;
    esac
}

# pick_backends WANTED AVAILABLE KIND...: comma-separated backends that are
# wanted (a comma list, or "all"), available here, and take one of KINDs.
# Prints nothing when none is left; notes a wanted backend that is missing.
pick_backends() {
    local wanted=$1 available=$2 picked="" kind b
    shift 2
    for kind in "$@"; do
        for b in $(takers "$kind"); do
            case ",$picked," in *",$b,"*) continue ;; esac
            if [ "$wanted" != "all" ]; then
                case ",$wanted," in *",$b,"*) ;; *) continue ;; esac
            fi
            case " $available " in
                *" $b "*) picked=${picked:+$picked,}$b ;;
                *) [ "$wanted" = "all" ] || note "backend $b skipped: not available here (see '$DLBENCH backends')" >&2 ;;
            esac
        done
    done
    printf '%s\n' "$picked"
}

# zoo_input_args MODEL: --shape (and --int-range where the zoo gives one) for
# every input of a zoo model, from `dlbench models --json`.  Token models'
# ONNX files may keep the sequence length dynamic, and dlbench bench never
# guesses a dynamic dimension; the batch dimension (the leading 1 here)
# follows --batch-sizes anyway.  Image models' exports have fixed shapes:
# nothing to add (as harness/pipeline/stages.py model_inputs).
zoo_input_args() {
    # shellcheck disable=SC2086
    $DLBENCH models --json "$1" | python3 -c '
import json, sys
for spec in json.load(sys.stdin):
    if spec["name"] != sys.argv[1] or not any(i["dtype"].startswith("int") for i in spec["inputs"]):
        continue
    for i in spec["inputs"]:
        print("--shape", i["name"] + "=" + "x".join(str(d) for d in [1] + list(i["shape"])))
    for i in spec["inputs"]:
        if i.get("int_range"):
            lo, hi = i["int_range"]
            print("--int-range", "%s=%d:%d" % (i["name"], lo, hi))
' "$1"
}

# finish: the script's exit status (1 if any run_soft step failed).
finish() {
    if [ "$SOFT_FAILURES" -gt 0 ]; then
        printf '\n%s step(s) exited 1 (failed cells or unverified files: see the database)\n' \
            "$SOFT_FAILURES"
        exit 1
    fi
}
