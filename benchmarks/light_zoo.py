"""The onnx package's nine "light" classic models through every command, as a new user
types them: the table of status, verdict and INT8 speed-up at batch 1.

The models ship inside the onnx wheel (``onnx/backend/test/data/light``): opset 9,
batch fixed at 1, every initializer also a graph input, every weight computed by a
``ConstantOfShape`` node (each weight tensor holds one value, 0.02, so the outputs are
a uniform 1/1000 whatever the input: the verdicts say the conversions compute what the
source computes, not that a trained model keeps its accuracy).  Speed does not depend
on the weights' values.

Per model, through the real CLI, default flags unless said:

* ``dlbench bench M.onnx M.int8.onnx -b onnxruntime --repeats R`` (batch 1: the model's);
* ``dlbench build M.onnx --to int8`` and ``--to fp16`` (verdict, normalization);
* ``dlbench verify M.onnx M.fp16.onnx``;
* ``dlbench eval M.onnx`` (default ``--data digits``: refused in one line) and
  ``dlbench eval M.int8.onnx --data heldout.npz`` (a small set labelled with 1000 classes).

    .venv/bin/python benchmarks/light_zoo.py [--models squeezenet,resnet50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)


def dlbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dlbench.harness", *args], cwd=cwd, capture_output=True, text=True
    )


def _records(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def _status(out: subprocess.CompletedProcess, recs: list[dict]) -> str:
    if out.returncode == 2:
        return "refused: " + out.stderr.strip().splitlines()[-1].split("error: ", 1)[-1]
    if not recs:
        return f"rc {out.returncode}"
    r = recs[0]
    verdict = (r.get("metrics") or {}).get("verdict")
    if verdict is not None:
        return "ok" if verdict["ok"] else "UNVERIFIED"
    return r["status"]


def one(name: str, work: Path, repeats: int) -> dict:
    src = work / f"light_{name}.onnx"
    shutil.copy(LIGHT / src.name, src)
    row: dict = {"model": name}
    for to in ("int8", "fp16"):
        start = time.perf_counter()
        out = dlbench("build", src.name, "--to", to, "--json", f"{to}.json", "-q", cwd=work)
        row[to] = _status(out, _records(work / f"{to}.json"))
        row[f"{to}_s"] = time.perf_counter() - start
    out = dlbench("verify", src.name, f"light_{name}.fp16.onnx", "--json", "verify.json", cwd=work)
    row["verify"] = _status(out, _records(work / "verify.json"))
    out = dlbench("eval", src.name, cwd=work)
    row["eval_default"] = _status(out, [])
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (8, 3, 224, 224)).astype(np.float32)
    np.savez(work / "heldout.npz", x=x, y=rng.integers(0, 1000, 8), x_test=x, y_test=rng.integers(0, 1000, 8))
    out = dlbench("eval", f"light_{name}.int8.onnx", "--data", "heldout.npz", "--json", "eval.json", cwd=work)
    row["eval_npz"] = _status(out, _records(work / "eval.json"))
    out = dlbench(
        "bench",
        src.name,
        f"light_{name}.int8.onnx",
        "-b",
        "onnxruntime",
        "--repeats",
        str(repeats),
        "--json",
        "bench.json",
        "-q",
        cwd=work,
    )
    benches = _records(work / "bench.json")
    row["bench"] = ", ".join(sorted({r["status"] for r in benches})) or f"rc {out.returncode}"
    by_precision = {r["precision"]: r for r in benches if r.get("throughput_sps")}
    if {"fp32", "int8"} <= set(by_precision):
        fp32, int8 = by_precision["fp32"]["throughput_sps"], by_precision["int8"]["throughput_sps"]
        row.update(fp32_sps=fp32, int8_sps=int8, speedup=int8 / fp32)
    return row


def table(rows: list[dict]) -> str:
    head = (
        "| Model | bench | build int8 | build fp16 | verify (fp16) | eval, default | "
        "eval, 1000-class npz | fp32 /s | int8 /s | INT8 speed-up |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        sp = f"{r['speedup']:.2f}×" if "speedup" in r else ""
        lines.append(
            f"| {r['model']} | {r['bench']} | {r['int8']} ({r['int8_s']:.0f} s) | "
            f"{r['fp16']} ({r['fp16_s']:.0f} s) | {r['verify']} | "
            f"{r['eval_default']} | {r['eval_npz']} | {r.get('fp32_sps', 0):.1f} | "
            f"{r.get('int8_sps', 0):.1f} | {sp} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix=f"light-{name}-") as tmp:
            rows.append(one(name, Path(tmp), args.repeats))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))
    ok = all(r["int8"] == r["fp16"] == r["verify"] == "ok" for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
