"""Does the INT8 build pay on CNNs dlbench did not make?  INT8 against fp32 on ONNX Runtime.

Three networks built outside dlbench's own zoo and exporters, as a user
brings them:

* ``keras-resnet50`` — ``keras.applications.ResNet50(weights=None)``, 224×224×3
  NHWC input ``x``, Softmax output, exported by tf2onnx (``from_function``);
* ``keras-resnet50v2`` — ``keras.applications.ResNet50V2(weights=None)``, same
  input and output: the pre-activation variant (BatchNorm + ReLU before each
  convolution, which no convolution can absorb: int8 Mul/Add of its own);
* ``torch-resnet50`` — a ResNet-50 v1.5 defined in this file (torchvision's
  layout and initialization; torchvision has no CPU build here), exported by
  ``torch.onnx.export`` (TorchScript exporter), NCHW input, logits output.

Each is exported in a child process (the framework never enters this one),
then goes through the real CLI: ``dlbench build --to int8`` (verdict, recipe,
float nodes) and ``dlbench bench fp32 int8 -b onnxruntime --batch-sizes 32``
(one process per cell; throughput is dlbench's).  The script adds what ONNX
Runtime made of the INT8 graph: the compute ops left in float after its
fusions (a Conv or DequantizeLinear island there is time lost).

``--models keras-mobilenetv2`` adds MobileNetV2 (not in the default set): its
int8 graph fuses completely, but ONNX Runtime 1.31's int8 depthwise
convolution is barely faster than its fp32 one (136 against 161 ms per batch
of 32 here, while the 1×1 convolutions gain 3-4×), which holds the whole
network near 2.2×; and with random weights its activations vanish to ~1e-12
by the last block, so its output is 1/1000 whatever the input and its
verdict is vacuous.

Read the verdicts with the weights in mind: random-init Keras applications
are near-constant functions of their input (the arg-max is the same class
for every image); ResNet-50's still carries a signal (about 28 dB SQNR at the
last block in int8).  The "input spread" column says how much the fp32
output moves between inputs.  Speed does not depend on the weights.

Target: INT8 throughput at least 3.0× fp32 with verdict ok, for each model.
Exit status 0 if every model reaches it, 1 if not.

    .venv/bin/python benchmarks/int8_speedup.py                 # full (several minutes)
    .venv/bin/python benchmarks/int8_speedup.py --quick         # one short process per cell
    .venv/bin/python benchmarks/int8_speedup.py --models torch-resnet50 --quick
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))

TARGET = 3.0
SIZE, CLASSES = 224, 1000
MODELS = ("keras-resnet50", "keras-resnet50v2", "torch-resnet50")
KERAS_APPS = {
    "keras-resnet50": "ResNet50",
    "keras-resnet50v2": "ResNet50V2",
    "keras-mobilenetv2": "MobileNetV2",
}
# ONNX Runtime's fused integer kernels (QLinearConv, QGemm, NhwcMaxPool on uint8, ...).
INT8_OPS = ("QLinear", "QGemm", "Nhwc", "MatMulInteger", "ConvInteger", "DynamicQuantize")
# Ops that are free, or that ONNX Runtime's int8 kernels leave float by design.
NOT_COMPUTE = {
    "QuantizeLinear",
    "DequantizeLinear",
    "Transpose",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
    "Shape",
    "Softmax",
    "ReorderInput",
    "ReorderOutput",
}


# --- the networks (child process only) ------------------------------------------------------


def export_keras(app: str, out: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import onnx
    import tensorflow as tf
    import tf2onnx

    keras.utils.set_random_seed(0)
    net = getattr(keras.applications, app)(weights=None, input_shape=(SIZE, SIZE, 3), classes=CLASSES)
    signature = [tf.TensorSpec((None, SIZE, SIZE, 3), tf.float32, name="x")]

    @tf.function(input_signature=signature)
    def forward(x):
        return net(x, training=False)

    proto, _ = tf2onnx.convert.from_function(forward, input_signature=signature, opset=17)
    onnx.save(proto, out)


def torch_resnet50():
    """ResNet-50 v1.5 (stride on the 3×3 conv), torchvision's layout and init."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int):
            super().__init__()
            cout = width * 4
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (x if self.down is None else self.down(x)))

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(3, 2, 1),
            )
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                    cin = width * 4
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, CLASSES)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            return self.fc(self.pool(self.blocks(self.stem(x))).flatten(1))

    return ResNet50()


def export_torch(out: str) -> None:
    import warnings

    import torch

    torch.manual_seed(0)
    net = torch_resnet50().eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter is "legacy"
        torch.onnx.export(
            net,
            torch.zeros(1, 3, SIZE, SIZE),
            out,
            input_names=["input"],
            output_names=["logits"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        )


# --- the measurement (this process: ONNX Runtime only) --------------------------------------


def dlbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dlbench.harness", *args], env=env, text=True, capture_output=True
    )


def float_left(path: Path, threads: int) -> tuple[str, collections.Counter]:
    """Compute ops ONNX Runtime left in float in the optimized INT8 graph, and all op counts."""
    import onnx
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    opts.optimized_model_filepath = str(path.with_suffix(".opt.onnx"))
    ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    ops = collections.Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)
    left = {k: v for k, v in ops.items() if not k.startswith(INT8_OPS) and k not in NOT_COMPUTE}
    dq = ops.get("DequantizeLinear", 0)
    text = ", ".join(f"{k}×{v}" for k, v in sorted(left.items())) or "none"
    return f"{text} (DQ×{dq})", ops


def input_spread(path: Path, threads: int) -> float:
    """How much the fp32 output moves between inputs: mean over outputs of the std across
    8 verification-style images, over the mean |output|."""
    import numpy as np
    import onnxruntime as ort

    from dlbench.converters import onnx_io, onnx_summary
    from dlbench.harness.verify import inputs as vin

    summary = onnx_summary.summarize(onnx_io.load(path, check=False))
    chw, classes = vin.image_shape_of(summary, str(path))
    x = vin.image_stream(chw, classes, 8, 1, seed=4_242_424)[0]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    return float(y.std(axis=0).mean() / max(np.abs(y).mean(), 1e-30))


def one_model(name: str, a, tmp: Path, env: dict[str, str]) -> dict:
    fp32 = tmp / f"{name}.onnx"
    child = subprocess.run(
        [sys.executable, str(HERE), "--export", name, str(fp32)], text=True, capture_output=True
    )
    if child.returncode != 0:
        raise SystemExit(f"{name}: export failed:\n{child.stderr[-3000:]}")
    int8 = tmp / f"{name}.int8.onnx"
    build = dlbench(
        "build",
        str(fp32),
        "--to",
        "int8",
        "--out",
        str(int8),
        "--threads",
        str(a.threads),
        "--calib-size",
        str(a.calib_size),
        "--json",
        str(tmp / f"{name}.build.json"),
        "--quiet",
        env=env,
    )
    if build.returncode == 2:
        raise SystemExit(f"{name}: dlbench build refused it: {build.stderr.strip()}")
    [rec] = json.loads((tmp / f"{name}.build.json").read_text())
    print(build.stdout, file=sys.stderr)
    rule = (
        ["--warmup", "2", "--max-warmup", "4", "--min-iterations", "5", "--min-duration", "0"]
        if a.quick
        else ["--repeats", str(a.repeats)]
    )
    bench = dlbench(
        "bench",
        str(fp32),
        str(int8),
        "-b",
        "onnxruntime",
        "--batch-sizes",
        str(a.batch_size),
        "--threads",
        str(a.threads),
        *rule,
        "--json",
        str(tmp / f"{name}.bench.json"),
        "--quiet",
        env=env,
    )
    if bench.returncode != 0:
        raise SystemExit(f"{name}: dlbench bench failed: {bench.stderr[-2000:]}")
    cells = json.loads((tmp / f"{name}.bench.json").read_text())
    sps = {c["precision"]: c["metrics"]["throughput_sps"] for c in cells}
    verdict = rec["metrics"].get("verdict") or {}
    [out] = (verdict.get("outputs") or {"?": {}}).values()
    left, _ = float_left(int8, a.threads)
    recipe = rec["context"].get("build_info", {}).get("recipe", {})
    return {
        "model": name,
        "status": rec["status"],
        "cosine": out.get("cosine"),
        "top1": out.get("top1"),
        "fp32_sps": sps.get("fp32"),
        "int8_sps": sps.get("int8"),
        "speedup": sps["int8"] / sps["fp32"],
        "float_after_fusion": left,
        "float_nodes": [f"{d['node']} ({d['op']})" for d in recipe.get("float_nodes", [])],
        "input_spread": input_spread(fp32, a.threads),
        "layer_errors": rec["metrics"].get("layer_errors"),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="default: physical cores")
    p.add_argument("--calib-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="bench processes per cell")
    p.add_argument(
        "--quick",
        action="store_true",
        help="5 measured iterations per cell, one process, 16 calibration images",
    )
    p.add_argument("--json", default=None)
    p.add_argument("--export", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.export:
        name, out = a.export
        export_torch(out) if name == "torch-resnet50" else export_keras(KERAS_APPS[name], out)
        return 0
    from dlbench.harness.cells.threads import physical_cores
    from dlbench.harness.machine.fingerprint import fingerprint
    from dlbench.harness.output.tables import markdown

    a.threads = a.threads or physical_cores()
    if a.quick:
        a.calib_size = min(a.calib_size, 16)
    names = [m for m in a.models.split(",") if m]
    unknown = set(names) - set(MODELS) - set(KERAS_APPS)
    if unknown:
        raise SystemExit(
            f"unknown model(s) {', '.join(sorted(unknown))}; choose from "
            f"{', '.join(dict.fromkeys([*MODELS, *KERAS_APPS]))}"
        )
    results = []
    with tempfile.TemporaryDirectory(prefix="dlbench-int8-speedup-") as tmp:
        env = dict(os.environ, DLBENCH_DB=str(Path(tmp, "r.sqlite")))
        for name in names:
            print(f"{name}: export, build, bench ...", file=sys.stderr, flush=True)
            results.append(one_model(name, a, Path(tmp), env))
    cpu = fingerprint()["cpu"]
    print(
        f"ONNX Runtime CPU, batch {a.batch_size}, {a.threads} threads; "
        f"{'quick: 5 iterations' if a.quick else f'median of {a.repeats} processes'} per "
        f"cell; {cpu['model']} ({', '.join(cpu['isa'])})"
    )
    rows = [
        [
            r["model"],
            f"{r['fp32_sps']:.1f}",
            f"{r['int8_sps']:.1f}",
            f"{r['speedup']:.2f}",
            r["status"],
            f"{r['cosine']:.6f}" if r["cosine"] is not None else "",
            "" if r["top1"] is None else f"{r['top1']:.0%}",
            f"{r['input_spread']:.2g}",
            ", ".join(r["float_nodes"]) or "none",
            r["float_after_fusion"],
        ]
        for r in results
    ]
    print(
        markdown(
            (
                "Model",
                "fp32 img/s",
                "int8 img/s",
                "Speed-up",
                "Verdict",
                "Cosine",
                "Top-1",
                "Input spread",
                "Kept float by the recipe",
                "Float ops after ORT fusion",
            ),
            rows,
        )
    )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"batch_size": a.batch_size, "threads": a.threads, "quick": a.quick, "results": results},
                indent=2,
            )
        )
    return 0 if all(r["speedup"] >= TARGET and r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
