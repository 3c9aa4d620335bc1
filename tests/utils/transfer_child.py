"""One framework's part of the weight-transfer test (tests/models/test_weights_transfer.py).

Run as ``python tests/utils/transfer_child.py FRAMEWORK DIR MODEL[,MODEL...]``, one
framework per process, the three side by side: TensorFlow and MindSpore cannot share a
process.  Two halves, with a meeting point between them (tests/utils/peers.py):

* export: build each model with seeded weights, make every batch-norm
  statistic, gamma, beta and bias non-trivial (a fresh network has BN at the
  identity and zero biases, which would hide a mixed-up gamma/beta or mean/var),
  load them back through ``import_weights``, and write the canonical weights
  (``MODEL.FW.weights.npz``) and the eval-mode logits on fixed inputs
  (``MODEL.FW.out.npz``, with the export->import->export round-trip error).
* import, once every framework has exported: for every other framework's weights file
  in DIR, take the network the export half built (its own perturbed weights, from
  another seed than any other framework's), record its logits before the import (to
  show the import changed the function), import, and write the logits
  (``MODEL.SRC-FW.out.npz``).
The parent compares; this script only computes.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

FRAMEWORKS = ("pytorch", "tensorflow", "mindspore")
INPUT_SEED = 20240917
BATCH = 4


def inputs(spec):
    if spec.family == "gnmt":  # padded sources: the attention's mask must agree too
        from dlbench.models.gnmt import example_inputs

        return example_inputs(spec.config, BATCH, seed=INPUT_SEED)
    if spec.token_inputs or len(spec.inputs) > 1:  # ids, or boxes beside an image:
        from dlbench.models import synthetic  # a tuple, one array per input

        return synthetic.sample_inputs(spec, BATCH, seed=INPUT_SEED)
    shape = (BATCH, *spec.inputs[0].shape)
    return np.random.default_rng(INPUT_SEED).standard_normal(shape).astype(np.float32)


def perturb(weights: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = dict(weights)
    bn = {k[: -len(".running_var")] for k in weights if k.endswith(".running_var")}
    for key, value in weights.items():
        layer, _, suffix = key.rpartition(".")
        if layer in bn:
            lo, hi = {"weight": (0.5, 1.5), "running_var": (0.5, 2.0)}.get(suffix, (-0.3, 0.3))
            out[key] = rng.uniform(lo, hi, value.shape).astype(np.float32)
        elif key.endswith("_norm.weight"):  # SSD's L2Norm scale: 20 in every channel
            out[key] = rng.uniform(10.0, 30.0, value.shape).astype(np.float32)
        elif suffix == "bias":
            span = 0.1 * _gain(weights.get(f"{layer}.weight"))
            out[key] = rng.uniform(-span, span, value.shape).astype(np.float32)
    return out


def _gain(weight) -> float:
    """How much the layer scales its input (std x sqrt(fan-in)), at most 1: a bias
    bigger than the signal it is added to would make every sample's logits the same
    (VGG's dense layers start at N(0, 0.01): a gain of 0.1 to 0.6)."""
    if weight is None or weight.ndim < 2:
        return 1.0
    return min(1.0, float(weight.std()) * float(np.sqrt(np.prod(weight.shape[1:]))))


def max_diff(a: dict, b: dict) -> float:
    assert list(sorted(a)) == list(sorted(b)), "round trip changed the names"
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


def predict(framework: str, net, x: np.ndarray) -> np.ndarray:
    if framework == "pytorch":
        net.eval()
    elif framework == "mindspore":
        net.set_train(False)
    return importlib.import_module(f"dlbench.models.native.{framework}").predict(net, x)


def main(argv: list[str]) -> int:
    framework, directory, models = argv
    if framework == "mindspore":
        importlib.import_module("mindspore")  # before anything that loads protobuf
    from dlbench.models import weights as canonical
    from dlbench.models.registry import get_model
    from tests.utils.peers import export_then_import

    tool = canonical.module(framework)
    directory = Path(directory)
    names = models.split(",")

    def export() -> dict:
        """Each model's network, its inputs and its logits on them, for the import half."""
        nets = {}
        for name in names:
            spec = get_model(name)
            x = inputs(spec)
            net = spec.build(framework, seed=1)
            w = perturb(tool.export_weights(net), seed=len(name) + FRAMEWORKS.index(framework))
            tool.import_weights(net, w)
            back = tool.export_weights(net)
            canonical.save(
                directory / f"{name}.{framework}.weights.npz", back, model=name, framework=framework
            )
            logits = predict(framework, net, x)
            np.savez(directory / f"{name}.{framework}.out.npz", logits=logits, roundtrip=max_diff(w, back))
            nets[name] = (net, x, logits)
        return nets

    def imports(nets: dict) -> None:
        # The exported network takes each source's weights in turn.  A weight an import
        # missed keeps this framework's perturbed value or the first source's, each from
        # another seed than the source compared: as wrong for its logits as a fresh
        # network's would be, so the comparison still fails on it.
        for name in names:
            net, x, before = nets[name]  # before: the export's own logits, nothing imported yet
            for source in FRAMEWORKS:
                if source == framework:
                    continue
                w, meta = canonical.load(directory / f"{name}.{source}.weights.npz")
                assert meta["model"] == name, meta
                tool.import_weights(net, w)
                np.savez(
                    directory / f"{name}.{source}-{framework}.out.npz",
                    logits=predict(framework, net, x),
                    before=before,
                    roundtrip=max_diff(w, tool.export_weights(net)),
                )

    export_then_import(directory, framework, export, imports)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
