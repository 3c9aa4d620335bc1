"""Every zoo model is the same network in every framework.

Parametrized over the registry and each model's frameworks, so a new model
or framework is tested without new test code.  Each case runs in its
framework's test group (see tests/suites.py).
"""

import importlib
import math

import numpy as np
import pytest

from dlbench.models.registry import get_model, list_models

# Left out: gnmt-greedy is gnmt-mini-greedy's code at gnmt's sizes, with gnmt's counts
# (tests/harness/data/test_gnmt_data.py), and its 50 unrolled decoder steps take MindSpore minutes to
# trace and compile (PyNative hooks, then graph mode) where gnmt itself takes seconds.
LEFT_OUT = {"gnmt-greedy"}
# Counted and named, not run: Mask R-CNN's 800 px forwards take 10-40 s each per framework
# (Keras: 11-13 s at batch 1, 2.6 GB), and maskrcnn-mini runs the same code.
COUNTS_ONLY = {"maskrcnn", "maskrcnn-r101"}
# MindSpore fires forward hooks in PyNative mode only, where one 800 px Mask R-CNN forward
# takes 40 s on one core.  ResNet-101's backbone is ResNet-50's code with 23 blocks in its
# third stage: maskrcnn's MindSpore trace and maskrcnn-r101's PyTorch and Keras traces
# cover it, so here maskrcnn-r101 is held to its parameter count and weight names.
MACS_TRACED_ELSEWHERE = {("maskrcnn-r101", "mindspore")}
CASES = [
    pytest.param(m, fw, marks=getattr(pytest.mark, fw), id=f"{m}-{fw}")
    for m in list_models()
    if m not in LEFT_OUT
    for fw in get_model(m).frameworks
]


def _forward(framework, model, x):
    """Eval-mode logits; ``x`` is the spec's inputs, as models.native takes them."""
    if framework == "pytorch":
        model.eval()
    elif framework == "mindspore":
        model.set_train(False)
    return importlib.import_module(f"dlbench.models.native.{framework}").predict(model, x)


@pytest.mark.parametrize("name,framework", CASES)
def test_same_parameters_flops_and_output_shape(name, framework):
    spec = get_model(name)
    counting = importlib.import_module(f"dlbench.models.counting.{framework}")
    model = spec.build(framework)
    assert counting.trainable_parameters(model) == spec.parameter_count
    if (name, framework) not in MACS_TRACED_ELSEWHERE:
        assert counting.forward_macs(model, spec) == spec.macs_per_sample
    family = importlib.import_module(f"dlbench.models.{spec.family}")
    if name not in COUNTS_ONLY:
        if spec.token_inputs or len(spec.inputs) > 1:  # ids, or boxes beside an image
            from dlbench.models import synthetic

            x = synthetic.sample_inputs(spec, 2)
        else:
            c, h, w = spec.inputs[0].shape
            x = np.random.default_rng(0).standard_normal((2, c, h, w)).astype(np.float32)
        y = _forward(framework, model, x)  # predict takes NCHW and converts itself
        # A family whose logits are not a classifier's (batch, classes) says what they are.
        per_sample = getattr(family, "output_shape", lambda cfg: (spec.num_classes,))(spec.config)
        assert y.shape == (2, *per_sample)
        assert np.isfinite(y).all()
    # A family that spells out its weight names (independently of any framework)
    # holds every builder to them: a misnamed or reshaped layer fails here, not in
    # a weight transfer.
    canonical = getattr(family, "canonical_shapes", None)
    if canonical is not None:
        exported = importlib.import_module(f"dlbench.models.weights.{framework}").export_weights
        assert {k: v.shape for k, v in exported(model).items()} == canonical(spec.config)


def test_resnet50_is_the_published_size():
    spec = get_model("resnet50")
    assert spec.parameter_count == 25_557_032
    assert spec.macs_per_sample == 4_089_184_256


def _smallest_of_each_family() -> set[str]:
    smallest: dict[str, str] = {}
    for m in list_models():
        spec = get_model(m)
        best = smallest.get(spec.family)
        if best is None or spec.parameter_count < get_model(best).parameter_count:
            smallest[spec.family] = m
    return set(smallest.values())


# Each image family's smallest network (a mini, LeNet; DeepSpeech2's mini takes its
# spectrogram as a one-channel image, with its own objective's batches): a real training step of each,
# in the trainer's own session, is cheap enough for every family in every framework
# (ResNet-152's mini is ResNet-50's code with more blocks).
SMALLEST = _smallest_of_each_family()
STEP_CASES = [c for c in CASES if c.values[0] in SMALLEST and not get_model(c.values[0]).token_inputs]


@pytest.mark.parametrize("name,framework", STEP_CASES)
def test_two_training_steps_move_every_weight_and_statistic(name, framework):
    """Through ``harness.training``'s session, as ``dlbench train`` runs it (MindSpore in
    graph mode): a weight the optimizer never reaches, a batch norm frozen in training,
    or a layer left out of the loss shows as an unchanged array.  Two steps, because a
    residual block's last batch norm starts at gamma 0 and shields its convolutions
    from the first step's gradient."""
    from dlbench.harness.training.base import TrainConfig
    from dlbench.models import synthetic

    spec = get_model(name)
    session_cls = importlib.import_module(f"dlbench.harness.training.{framework}").Session
    cfg = TrainConfig(
        model=name, framework=framework, batch_size=4, steps=2, warmup_steps=0, learning_rate=spec.default_lr
    )
    # The objective's own batches (SSD's matched detection targets; images for classifiers).
    session = session_cls(spec, cfg, synthetic.batches(spec, 4, 2, seed=0, layout=session_cls.layout))
    export = importlib.import_module(f"dlbench.models.weights.{framework}").export_weights
    before = export(session.model)
    losses = [session.step(0), session.step(1)]
    after = export(session.model)
    assert all(math.isfinite(x) for x in losses)
    # An LSTM's b_hh is frozen at zero by design (one trainable bias, as in Keras).
    assert sorted(k for k in before if np.array_equal(before[k], after[k]) and ".bias_hh_" not in k) == []


@pytest.mark.parametrize(
    "name,params,macs",
    [
        # torchvision's counts (v1.5 moves a stride, not a weight); MACs are conv + dense.
        ("resnet152", 60_192_808, 11_513_626_624),
        ("vgg16", 138_357_544, 15_470_264_320),
    ],
)
def test_seed_zoo_classifiers_are_the_published_size(name, params, macs):
    spec = get_model(name)
    assert (spec.parameter_count, spec.macs_per_sample) == (params, macs)
    assert spec.inputs[0].shape == (3, 224, 224) and spec.num_classes == 1000
