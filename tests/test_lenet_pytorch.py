"""LeNet-5 in PyTorch: its published size, canonical names, and the function it computes.

Counts and MACs against the walk for every framework are also
tests/models/test_models.py's; the cross-framework weight transfer is
tests/models/test_weights_transfer.py's.
"""

import numpy as np
import pytest

from dlbench.models.counting.pytorch import forward_macs, trainable_parameters
from dlbench.models.lenet import canonical_shapes, feature_map
from dlbench.models.native.pytorch import predict
from dlbench.models.registry import get_model
from dlbench.models.weights.pytorch import export_weights, import_weights
from tests.utils import lenet_reference


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


def test_network_matches_the_walk_and_the_canonical_names(spec):
    net = spec.build("pytorch", seed=0)
    assert trainable_parameters(net) == spec.parameter_count
    assert forward_macs(net, spec) == spec.macs_per_sample
    w = export_weights(net)
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)


def test_logits_are_the_numpy_reference(spec):
    net = spec.build("pytorch", seed=3)
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    got = predict(net.eval(), x)
    want = lenet_reference.logits(export_weights(net), x)
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_same_seed_same_weights_and_import_replaces_every_weight(spec):
    a = export_weights(spec.build("pytorch", seed=5))
    b = export_weights(spec.build("pytorch", seed=5))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    net = spec.build("pytorch", seed=6)
    import_weights(net, a)
    assert all(np.array_equal(export_weights(net)[k], a[k]) for k in a)
