"""Weights move between frameworks and keep computing the same function.

For each model, each framework exports canonical weights (``models.weights``)
with non-trivial BN statistics and biases, and its eval-mode logits on fixed
inputs; each of the other two frameworks imports them into its own build of
the model and must reproduce the logits within fp32 rounding.  Every
framework runs in its own child process (tests/utils/transfer_child.py): TensorFlow
and MindSpore cannot share one, and the core group imports no framework.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.models.registry import get_model
from tests.utils import ROOT
from tests.utils.frameworks import FRAMEWORKS, run_in_each

CHILD = ROOT / "tests" / "utils" / "transfer_child.py"
# lstm-tiny: embedding, two bidirectional LSTM layers (PyTorch's gate order and two
# biases on one side, Keras' transposed kernels and single bias on the other).
# deepspeech2-mini: asymmetric conv padding, batch norm, channel-major frame features,
# bidirectional LSTMs with summed directions, a dense layer at every frame.
# gnmt-mini: LSTMs in both directions, the attention's dense layers on 3-D and 4-D
# inputs, a padded source; gnmt-mini-greedy: its arg-max fed back for 12 steps.
# ssd300-mini: both raw heads of every prior, the L2Norm scale, dilated and padded convs.
# maskrcnn-mini: FPN's upsampling and P6 pool, the shared RPN head on five levels,
# RoIAlign's gathers on every level, the channel-major flatten before fc6, the transposed
# conv of the mask head.
MODELS = (
    "googlenet-mini",
    "resnet50-mini",
    "lenet5",
    "lstm-tiny",
    "vgg16-mini",
    "densenet121-mini",
    "din-mini",
    "deepspeech2-mini",
    "gnmt-mini",
    "gnmt-mini-greedy",
    "ssd300-mini",
    "maskrcnn-mini",
)
# Max |difference| allowed, relative to the logits' largest magnitude: fp32
# rounding through ~60 layers measured at most ~1e-6 of the scale here (32
# recurrent steps of lstm-tiny: ~1e-7).
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def transferred(tmp_path_factory):
    directory = tmp_path_factory.mktemp("weights")
    run_in_each(CHILD, str(directory), ",".join(MODELS))
    return directory


def _output_shape(model: str) -> tuple[int, ...]:
    """Per sample: (classes,), or the family's own (SSD: (priors, 4 + classes))."""
    import importlib

    spec = get_model(model)
    own = getattr(importlib.import_module(f"dlbench.models.{spec.family}"), "output_shape", None)
    return tuple(own(spec.config)) if own else (spec.num_classes,)


CASES = [
    pytest.param(m, s, t, id=f"{m}-{s}-to-{t}")
    for m in MODELS
    for s in FRAMEWORKS
    for t in FRAMEWORKS
    if s != t
]


@pytest.mark.parametrize("model,source,target", CASES)
def test_imported_weights_reproduce_the_source_logits(transferred, model, source, target):
    ref = np.load(transferred / f"{model}.{source}.out.npz")
    got = np.load(transferred / f"{model}.{source}-{target}.out.npz")
    logits = ref["logits"]
    assert logits.shape == got["logits"].shape == (4, *_output_shape(model))
    scale = float(np.abs(logits).max())
    bound = ATOL + RTOL * scale
    # The inputs must tell samples apart, or equal logits would prove little.
    assert float(logits.std(axis=0).mean()) > 1e-3 * scale
    # The target's own weights computed something else: the import is what matched.
    assert float(np.abs(got["before"] - logits).max()) > 100 * bound
    err = float(np.abs(got["logits"] - logits).max())
    assert err <= bound, f"{source} -> {target}: max |diff| {err:.3g} > {bound:.3g}"
    # export(import(w)) == w exactly, in the source and in the target.
    assert float(ref["roundtrip"]) == 0.0
    assert float(got["roundtrip"]) == 0.0


def test_canonical_lstm_names_are_pytorch_state_dict_keys(transferred):
    from dlbench.models import weights

    names = {fw: list(weights.load(transferred / f"lstm-tiny.{fw}.weights.npz")[0]) for fw in FRAMEWORKS}
    assert set(names["tensorflow"]) == set(names["pytorch"]) == set(names["mindspore"])
    assert {"embedding.weight", "lstm.0.weight_ih_l0", "lstm.1.bias_hh_l0_reverse", "fc.weight"} <= set(
        names["pytorch"]
    )
