"""LeNet-5: its published size, and in every framework the canonical names and the
function it computes.

Keras computes channels-last; its builder permutes the feature map to channels-first
before flattening so that ``fc1`` reads its inputs in PyTorch's order.  The numpy
reference (tests/utils/lenet_reference.py) flattens (C, H, W): equal logits from the
same canonical weights prove the order in every framework.

Counts and MACs against the walk for every framework are also
tests/models/test_models.py's (with a training step); the cross-framework weight
transfer is tests/models/test_weights_transfer.py's.
"""

import numpy as np
import pytest

from dlbench.models.lenet import canonical_shapes, feature_map
from dlbench.models.registry import get_model
from tests.utils import lenet_reference, per_framework
from tests.utils.frameworks import frameworks


@pytest.fixture(scope="module")
def spec():
    return get_model("lenet5")


def test_the_spec_is_lenet5(spec):
    # 156 + 2,416 + 48,120 + 10,164 + 850 parameters (conv1, conv2, fc1, fc2, fc3).
    assert spec.parameter_count == 61_706
    # conv1 28x28x25x6 + conv2 10x10x25x6x16 + 400x120 + 120x84 + 84x10.
    assert spec.macs_per_sample == 117_600 + 240_000 + 48_000 + 10_080 + 840 == 416_520
    assert spec.inputs[0].shape == (1, 32, 32) and spec.num_classes == 10
    assert (spec.network_type, spec.dataset, spec.default_batch_size, spec.task) == (
        "CNN",
        "digits (UCI optdigits)",
        64,
        "image-classification",
    )
    assert feature_map(spec.config) == (16, 5, 5)


@pytest.mark.parametrize("framework", frameworks())
def test_network_matches_the_walk_and_the_canonical_names(spec, framework):
    counting = per_framework.counting(framework)
    net = spec.build(framework, seed=0)
    assert counting.trainable_parameters(net) == spec.parameter_count == 61_706
    assert counting.forward_macs(net, spec) == spec.macs_per_sample == 416_520
    w = per_framework.weights(framework).export_weights(net)
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)
    if framework == "tensorflow":
        assert net.input_shape == (None, 32, 32, 1)  # NHWC


@pytest.mark.parametrize("framework", frameworks())
def test_logits_are_the_numpy_reference(spec, framework):
    net = spec.build(framework, seed=3)
    if framework == "pytorch":
        net.eval()
    elif framework == "mindspore":
        net.set_train(False)
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    got = per_framework.native(framework).predict(net, x)  # NCHW in (Keras transposes inside)
    want = lenet_reference.logits(per_framework.weights(framework).export_weights(net), x)
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("framework", frameworks())
def test_same_seed_same_weights_and_import_replaces_every_weight(spec, framework):
    weights = per_framework.weights(framework)
    a = weights.export_weights(spec.build(framework, seed=5))
    b = weights.export_weights(spec.build(framework, seed=5))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    net = spec.build(framework, seed=6)
    weights.import_weights(net, a)
    assert all(np.array_equal(weights.export_weights(net)[k], a[k]) for k in a)


@pytest.mark.tensorflow
def test_an_nhwc_flatten_would_be_caught(spec):
    """The reference is sensitive to the order: fc1's rows permuted to NHWC order
    change the logits (so the reference test above could fail)."""
    from dlbench.models.weights.tensorflow import export_weights

    w = export_weights(spec.build("tensorflow", seed=3))
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    nhwc = dict(w)
    rows = w["fc1.weight"].reshape(120, 16, 5, 5).transpose(0, 2, 3, 1)
    nhwc["fc1.weight"] = rows.reshape(120, 400)
    assert np.abs(lenet_reference.logits(nhwc, x) - lenet_reference.logits(w, x)).max() > 1e-3
