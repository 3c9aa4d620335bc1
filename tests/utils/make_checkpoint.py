"""Write an untrained but realistic checkpoint + manifest, as ``dlbench train`` would.

Usage: python tests/utils/make_checkpoint.py FRAMEWORK MODEL OUT_DIR [SEED]

The export tests need full ResNet-50 checkpoints from every framework, and
training one costs minutes; building and saving costs seconds.  A freshly
built ResNet is a poor test of an exporter, though: every block's last BN
starts with gamma 0 (the block is the identity), and with running mean 0 /
variance 1 the activations either vanish or explode through 16 blocks, so the
logits hardly depend on the input and a broken layer could pass unnoticed.
So the network is built without zero-init, every BatchNorm gets seeded random
gamma and beta, and then its running statistics are set from one
training-mode forward pass over synthetic images (momentum set so the pass
replaces them): the BN recalibration a trained network has, so activations
are normalized at every depth and the logits depend on every layer and on
the input.  Runs as a subprocess (it imports the framework).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dlbench.models import synthetic
from dlbench.models.registry import get_model

CALIBRATION_BATCH = 8


def _gamma_beta(rng, c):
    return rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-0.2, 0.2, c).astype(np.float32)


def _images(spec, seed, layout="NCHW"):
    return synthetic.image_batches(spec, CALIBRATION_BATCH, 1, seed=seed + 1, layout=layout)[0][0]


def pytorch(spec, out: Path, rng, seed) -> str:
    import torch

    model = spec.build("pytorch", seed=int(rng.integers(1 << 30)), zero_init_residual=False)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                g, b = _gamma_beta(rng, m.num_features)
                m.weight.copy_(torch.from_numpy(g)), m.bias.copy_(torch.from_numpy(b))
                m.momentum = 1.0  # running stats := this batch's
        model.train()(torch.from_numpy(_images(spec, seed)))
    torch.save(model.state_dict(), out / "model.pt")
    return torch.__version__


def tensorflow(spec, out: Path, rng, seed) -> str:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    model = spec.build("tensorflow", seed=int(rng.integers(1 << 30)), zero_init_residual=False)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            g, b = _gamma_beta(rng, layer.gamma.shape[0])
            layer.gamma.assign(g), layer.beta.assign(b)
            layer.momentum = 0.0  # Keras keeps `momentum` of the old value
    model(_images(spec, seed, "NHWC"), training=True)
    model.save(out / "model.keras")
    return tf.__version__


def mindspore(spec, out: Path, rng, seed) -> str:
    os.environ.setdefault("GLOG_v", "3")
    import mindspore as ms
    from mindspore import nn

    import dlbench.models.resnet.mindspore as ms_resnet

    ms_resnet.BN_MOMENTUM = 0.0  # read by the builder; MindSpore keeps `momentum`
    model = spec.build("mindspore", seed=int(rng.integers(1 << 30)), zero_init_residual=False)
    for _, cell in model.cells_and_names():
        if isinstance(cell, nn.BatchNorm2d):
            g, b = _gamma_beta(rng, cell.gamma.shape[0])
            cell.gamma.set_data(ms.Tensor(g)), cell.beta.set_data(ms.Tensor(b))
    model.set_train(True)
    model(ms.Tensor(_images(spec, seed)))
    model.set_train(False)
    ms.save_checkpoint(model, str(out / "model.ckpt"))
    return ms.__version__


def main(argv: list[str]) -> int:
    framework, model_name, out = argv[0], argv[1], Path(argv[2])
    seed = int(argv[3]) if len(argv) > 3 else 0
    spec = get_model(model_name)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    version = {"pytorch": pytorch, "tensorflow": tensorflow, "mindspore": mindspore}[framework](
        spec, out, rng, seed
    )
    checkpoint = {"pytorch": "model.pt", "tensorflow": "model.keras", "mindspore": "model.ckpt"}
    manifest = {
        "format": "dlbench-checkpoint/1",
        "model": spec.name,
        "framework": framework,
        "framework_version": version,
        "checkpoint": checkpoint[framework],
        "layout": "NHWC" if framework == "tensorflow" else "NCHW",
        "seed": seed,
        "steps": 0,
        "note": "built and saved without training (tests/utils/make_checkpoint.py)",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
