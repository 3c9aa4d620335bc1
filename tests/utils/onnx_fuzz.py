"""A bounded mutation fuzzer: small ONNX models, mutated by seed, through bench, build and
verify.  Used by tests/test_fuzz.py; ``python tests/utils/onnx_fuzz.py --mutants 300`` is the
long run.

Each mutant is one class of damage a downloaded file can carry (bytes flipped, an op or
dtype changed, a dimension zero, negative, huge or gone, an opset or IR version out of
range, external data that escapes or is missing, an initializer cut short, outputs gone
or duplicated).  Every command must end in one of: success (0), a measured failure (1),
or a refusal (2) with exactly one ``error:`` line; never a traceback, a hang or a file
left half-written.  The commands run in this process (``dlbench.harness.cli.main``), so
a refusal costs milliseconds; cells that do run are processes with a timeout.
"""

from __future__ import annotations

import contextlib
import io
import random
import signal
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HANG_S = 60


def mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32), "w2")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["logits"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _op(m, rng):
    node = rng.choice(list(m.graph.node))
    node.op_type = rng.choice(["Conv", "Softmax", "NoSuchOp", "Identity", "Unique", ""])


def _dtype(m, rng):
    t = m.graph.input[0].type.tensor_type
    t.elem_type = rng.choice(
        [0, TensorProto.INT8, TensorProto.FLOAT16, TensorProto.STRING, TensorProto.BOOL, 99]
    )


def _dims(m, rng):
    dims = m.graph.input[0].type.tensor_type.shape.dim
    d = dims[rng.randrange(len(dims))]
    choice = rng.choice(["zero", "negative", "huge", "symbolic", "gone"])
    if choice == "gone":
        del dims[:]
    elif choice == "symbolic":
        d.dim_param = "weird dim"
    else:
        d.dim_value = {"zero": 0, "negative": -3, "huge": 2**40}[choice]


def _versions(m, rng):
    if rng.random() < 0.5:
        m.opset_import[0].version = rng.choice([1, 5, 99])
    else:
        m.ir_version = rng.choice([1, 3, 20])


def _external(m, rng):
    init = m.graph.initializer[rng.randrange(len(m.graph.initializer))]
    init.ClearField("raw_data")
    del init.float_data[:]
    init.data_location = TensorProto.EXTERNAL
    entry = init.external_data.add()
    entry.key, entry.value = (
        "location",
        rng.choice(["../../../../etc/passwd", "missing.bin", "/etc/hostname"]),
    )


def _initializer(m, rng):
    init = m.graph.initializer[rng.randrange(len(m.graph.initializer))]
    raw = numpy_helper.to_array(init).tobytes()
    init.ClearField("float_data")
    init.raw_data = raw[: rng.randrange(len(raw))]
    if rng.random() < 0.5:
        init.dims[0] = init.dims[0] + rng.choice([-1, 7])


def _outputs(m, rng):
    outs = m.graph.output
    choice = rng.choice(["gone", "duplicate", "dangling"])
    if choice == "gone":
        del outs[:]
    elif choice == "duplicate":
        outs.add().CopyFrom(outs[0])
    else:
        outs[0].name = "not_produced"


MUTATIONS = {
    "op": _op,
    "dtype": _dtype,
    "dims": _dims,
    "versions": _versions,
    "external": _external,
    "initializer": _initializer,
    "outputs": _outputs,
    "bytes": None,  # applied to the serialized file
}


def mutant(seed: int) -> tuple[str, bytes]:
    """(what was done, the file's bytes) for one seed."""
    rng = random.Random(seed)
    kind = list(MUTATIONS)[seed % len(MUTATIONS)]
    m = _copy(mlp())
    if MUTATIONS[kind] is not None:
        MUTATIONS[kind](m, rng)
        return kind, m.SerializeToString()
    data = bytearray(m.SerializeToString())
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return kind, bytes(data)


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


def run_cli(argv: list[str]) -> tuple[int | None, str]:
    """(exit status, stderr) of the CLI in this process; status None: it raised (the
    traceback is in stderr) or hung."""
    from dlbench.harness.cli import main

    err, out = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except Hang:
        return None, f"HANG after {HANG_S} s"
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - a traceback is exactly what is being counted
        import traceback

        return None, err.getvalue() + traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, err.getvalue()


COMMANDS = {
    "bench": lambda f: (
        ["bench", f, "-b", "onnxruntime", "--batch-sizes", "2", "--iterations", "2"]
        + ["--warmup", "1", "--timeout", "60"]
    ),
    "build": lambda f: ["build", f, "--to", "fp16", "--timeout", "60"],
    "verify": lambda f: ["verify", f, f, "--timeout", "60"],
}


def problem(code: int | None, stderr: str) -> str | None:
    """What is wrong with one command's ending, or None."""
    if code is None:
        return "hang" if stderr.startswith("HANG") else "traceback"
    if "Traceback" in stderr:
        return "traceback"
    if code == 2:
        errors = [line for line in stderr.splitlines() if ": error: " in line]
        others = [line for line in stderr.splitlines() if line.strip() and ": note: " not in line]
        if len(errors) != 1 or len(others) != 1:
            return "refusal not one line"
    elif code not in (0, 1):
        return f"exit {code}"
    return None


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    """Staging files and folders a command left (names beyond what it may write)."""
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.name not in keep and (p.name.startswith(".") or ".partial" in p.name or p.suffix == ".tmp")
    )


def fuzz(folder: Path, mutants: int, seed: int = 0) -> dict:
    """Run ``mutants`` mutants through every command in ``folder``; return the counts and
    the problems found (each with its seed, kind, command and stderr tail)."""
    outcomes: Counter = Counter()
    problems, disagreements = [], []
    db = folder / "fuzz.sqlite"
    for i in range(mutants):
        kind, data = mutant(seed + i)
        path = folder / f"m{i}.onnx"
        path.write_bytes(data)
        codes = {}
        for name, args in COMMANDS.items():
            before = {p.name for p in folder.iterdir()}
            code, stderr = run_cli([*args(str(path)), "--db", str(db)])
            outcomes[(kind, name, code)] += 1
            codes[name] = code
            left = leftovers(folder, before)
            why = problem(code, stderr) or (f"left {left}" if left else None)
            if why:
                problems.append(
                    {"seed": seed + i, "kind": kind, "command": name, "why": why, "stderr": stderr[-1500:]}
                )
        if len({c == 2 for c in codes.values()}) > 1:  # refused by some commands only
            disagreements.append({"seed": seed + i, "kind": kind, "codes": codes})
    return {
        "mutants": mutants,
        "runs": sum(outcomes.values()),
        "outcomes": outcomes,
        "problems": problems,
        "disagreements": disagreements,
    }


if __name__ == "__main__":
    import argparse
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mutants", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = fuzz(Path(tmp), a.mutants, a.seed)
    by_kind: Counter = Counter()
    for (kind, _command, code), n in result["outcomes"].items():
        by_kind[(kind, {0: "ok", 1: "failed cell", 2: "refused", None: "PROBLEM"}.get(code, code))] += n
    for (kind, what), n in sorted(by_kind.items(), key=str):
        print(f"{kind:12} {what:12} {n}")
    print(f"{result['mutants']} mutants, {result['runs']} runs, {len(result['problems'])} problems")
    print(f"{len(result['disagreements'])} mutants refused by some commands and not others:")
    for d in result["disagreements"]:
        print("  ", d["seed"], d["kind"], d["codes"])
    for prob in result["problems"]:
        print(prob["seed"], prob["kind"], prob["command"], prob["why"], prob["stderr"].splitlines()[-1:])
    sys.exit(1 if result["problems"] else 0)
