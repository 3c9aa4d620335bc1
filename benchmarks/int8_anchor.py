"""dlbench's INT8 against the anchor: ONNX Runtime's own quantization tool, used as its
documentation says (onnxruntime.ai, "Quantize ONNX models"):

* CNNs: ``quant_pre_process``, then ``quantize_static`` with QDQ, per-channel int8
  weights, uint8 activations, MinMax calibration on the same number of samples dlbench
  calibrates on (random normal images here: no data set is downloaded);
* transformers: ``quant_pre_process``, then ``quantize_dynamic`` with int8 weights.

``quant_pre_process`` is retried with ``skip_symbolic_shape=True`` where its symbolic
shape inference cannot finish (the remedy its documentation gives).

For each fp32 ONNX file: ``dlbench build --to int8`` (its own recipe and mode choice),
the anchor made in a child process, ``dlbench verify fp32 X`` for both (the same
verdict for both), then ``dlbench bench fp32 dlbench-int8 anchor-int8 -b onnxruntime``
at batch 32 (CNNs) or batch 8 at sequence 128 (encoders), one process per cell.
Prints INT8/fp32 throughput and the verdict of each.

    .venv/bin/python benchmarks/int8_anchor.py /tmp/eco-table/timm_resnet18/timm_resnet18.onnx ...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))

CALIBRATION_SAMPLES = 32

ANCHOR = r"""
import sys, numpy as np, onnx
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process
src, out, dynamic, samples = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
pre = out + ".pre.onnx"
try:
    quant_pre_process(src, pre)
except Exception:  # its docs' remedy where symbolic shape inference cannot finish (BERT's masks)
    quant_pre_process(src, pre, skip_symbolic_shape=True)
if dynamic:
    quantize_dynamic(pre, out, weight_type=QuantType.QInt8, per_channel=True)
else:
    m = onnx.load(pre, load_external_data=False)
    [x] = m.graph.input
    shape = [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.batches = iter([{x.name: rng.standard_normal([1, *shape[1:]]).astype(np.float32)}
                                 for _ in range(samples)])
        def get_next(self):
            return next(self.batches, None)
    quantize_static(pre, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
"""


def dl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dlbench.harness", *args], capture_output=True, text=True, env=env
    )


def transformer(path: Path) -> bool:
    import onnx

    from dlbench.converters.int8_recipe import choose_mode

    return choose_mode(onnx.load(str(path), load_external_data=False).graph, None)[0]


def verdict(fp32: Path, cand: Path, tmp: Path) -> str:
    out = tmp / f"{cand.stem}.verify.json"
    proc = dl("verify", str(fp32), str(cand), "--json", str(out))
    if not out.is_file():
        return f"failed ({proc.stderr.strip()[-100:]})"
    [rec] = json.loads(out.read_text())
    outputs = rec["metrics"]["verdict"]["outputs"]
    outputs = outputs.values() if isinstance(outputs, dict) else outputs
    worst = min(outputs, key=lambda o: o.get("cosine", 1.0))
    top1 = f", top-1 {worst['top1']:.0%}" if worst.get("top1") is not None else ""
    return f"{rec['status']} (cos {worst.get('cosine', float('nan')):.4f}{top1})"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="int8-anchor-") as t:
        tmp = Path(t)
        for m in map(Path, args.models):
            is_tf = transformer(m)
            ours, anchor = tmp / f"{m.stem}.dlbench.int8.onnx", tmp / f"{m.stem}.anchor.int8.onnx"
            build = dl(
                "build", str(m), "--to", "int8", "--out", str(ours), "--calib-size", str(CALIBRATION_SAMPLES)
            )
            if build.returncode not in (0, 1):
                rows.append([m.stem, "dlbench build failed: " + build.stderr.strip()[-120:]])
                continue
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    ANCHOR,
                    str(m),
                    str(anchor),
                    "1" if is_tf else "0",
                    str(CALIBRATION_SAMPLES),
                ],
                check=True,
                capture_output=True,
            )
            batch = "8" if is_tf else "32"
            db = tmp / f"{m.stem}.sqlite"
            bench = dl(
                "bench", str(m), str(ours), str(anchor), "-b", "onnxruntime", "--batch-sizes", batch,
                "--min-duration", "3", "--json", str(tmp / f"{m.stem}.bench.json"),
                env=dict(os.environ, DLBENCH_DB=str(db)),
            )  # fmt: skip
            if bench.returncode not in (0, 1):
                rows.append([m.stem, "bench failed: " + bench.stderr.strip()[-120:]])
                continue
            recs = {
                Path(r["context"]["artifact"]["path"]).name: r
                for r in json.loads((tmp / f"{m.stem}.bench.json").read_text())
            }
            base = recs[m.name]["throughput_sps"]
            rows.append(
                [
                    m.stem,
                    "dynamic (attention)" if is_tf else "static",
                    batch,
                    f"{base:.1f}",
                    f"{recs[ours.name]['throughput_sps'] / base:.2f}×",
                    verdict(m, ours, tmp),
                    f"{recs[anchor.name]['throughput_sps'] / base:.2f}×",
                    verdict(m, anchor, tmp),
                ]
            )
            print(" | ".join(rows[-1]), flush=True)
    heads = ["Model", "mode", "batch", "fp32 /s", "dlbench int8", "verdict", "anchor int8", "verdict"]
    print("| " + " | ".join(heads) + " |\n|" + " --- |" * len(heads))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
