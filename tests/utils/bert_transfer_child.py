"""One framework's part of the BERT weight-transfer test (tests/models/test_weights_transfer_bert.py).

Run as ``python tests/utils/bert_transfer_child.py FRAMEWORK DIR``, one framework per
process, the three side by side (TensorFlow and MindSpore cannot share a process), with a
meeting point between the two halves (tests/utils/peers.py):

* export: build bert-tiny's classification and pre-training networks with
  seeded weights, make them trained-like (a fresh BERT has LayerNorm at the
  identity, zero biases and tiny activations, which would hide a swapped
  gamma/beta, a dropped bias or an approximate GELU), load them back through
  ``import_weights``, and write the canonical weights (``HEAD.FW.weights.npz``)
  and the eval-mode outputs on fixed inputs (``HEAD.FW.out.npz``: ``out0``,
  ``out1``..., plus the export->import->export round-trip error).
* import, once every framework has exported: for every other framework's weights file
  in DIR, take the network the export half built (its own trained-like weights, from
  another seed than any other framework's), record its outputs before the import,
  import, and write the outputs after (``HEAD.SRC-FW.out.npz``).
The parent compares; this script only computes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("GLOG_v", "3")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

FRAMEWORKS = ("pytorch", "tensorflow", "mindspore")
HEADS = ("classification", "pretraining")
MODEL = "bert-tiny"
BATCH = 4
INPUT_SEED = 20240917


def perturb(weights: dict, seed: int) -> dict:
    """Trained-like weights: dense kernels scaled to 1/sqrt(fan-in) (BERT's init,
    std 0.02, keeps every activation so small that a tanh GELU would pass for an
    erf one), LayerNorm gammas around 1, and non-zero betas and biases."""
    rng = np.random.default_rng(seed)
    out = dict(weights)
    for key, value in weights.items():
        if ".LayerNorm." in key and key.endswith(".weight"):
            out[key] = rng.uniform(0.5, 1.5, value.shape).astype(np.float32)
        elif key.endswith(".bias"):
            out[key] = rng.uniform(-0.2, 0.2, value.shape).astype(np.float32)
        elif value.ndim == 2 and "embeddings" not in key:
            out[key] = (rng.standard_normal(value.shape) / np.sqrt(value.shape[1])).astype(np.float32)
    return out


def max_diff(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b), "round trip changed the names"
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


def forward(framework: str, net, inputs) -> list[np.ndarray]:
    """Eval-mode outputs as a list of float32 arrays (one per network output)."""
    if framework == "pytorch":
        import torch

        net.eval()
        with torch.no_grad():
            out = net(*[torch.from_numpy(a) for a in inputs])
        out = out if isinstance(out, tuple) else (out,)
        return [o.numpy() for o in out]
    if framework == "tensorflow":
        out = net(list(inputs), training=False)
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else (out,))]
    import mindspore as ms

    net.set_train(False)
    out = net(*[ms.Tensor(a) for a in inputs])
    return [o.asnumpy() for o in (out if isinstance(out, tuple) else (out,))]


def _save_outputs(path: Path, outputs: list[np.ndarray], **extra) -> None:
    np.savez(path, **{f"out{i}": o for i, o in enumerate(outputs)}, **extra)


def main(argv: list[str]) -> int:
    framework, directory = argv
    if framework == "mindspore":
        import mindspore as ms  # before anything that might load protobuf

        ms.set_context(mode=ms.GRAPH_MODE)
    import dlbench.models.bert as bert
    from dlbench.models import weights as canonical
    from dlbench.models.registry import get_model
    from tests.utils.peers import export_then_import

    tool = canonical.module(framework)
    directory = Path(directory)
    spec = get_model(MODEL)
    x = bert.example_inputs(spec.config, BATCH, seed=INPUT_SEED)

    def export() -> dict:
        """Each head's network and its outputs, for the import half."""
        nets = {}
        for head in HEADS:
            net = spec.build(framework, seed=1, head=head)
            w = perturb(tool.export_weights(net), seed=FRAMEWORKS.index(framework))
            tool.import_weights(net, w)
            back = tool.export_weights(net)
            canonical.save(
                directory / f"{head}.{framework}.weights.npz",
                back,
                model=MODEL,
                framework=framework,
                head=head,
            )
            outputs = forward(framework, net, x)
            _save_outputs(
                directory / f"{head}.{framework}.out.npz",
                outputs,
                roundtrip=max_diff(w, back),
                names=np.array(list(back)),
            )
            nets[head] = (net, outputs)
        return nets

    def imports(nets: dict) -> None:
        for head in HEADS:
            net, before = nets[head]  # before: the export's own outputs, nothing imported yet
            for source in FRAMEWORKS:
                if source == framework:
                    continue
                w, meta = canonical.load(directory / f"{head}.{source}.weights.npz")
                assert (meta["model"], meta["head"]) == (MODEL, head), meta
                tool.import_weights(net, w)
                _save_outputs(
                    directory / f"{head}.{source}-{framework}.out.npz",
                    forward(framework, net, x),
                    before0=before[0],
                    roundtrip=max_diff(w, tool.export_weights(net)),
                )

    export_then_import(directory, framework, export, imports)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
