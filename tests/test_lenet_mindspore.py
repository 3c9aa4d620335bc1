"""LeNet-5 in MindSpore: counts, canonical names and the function it computes (a
graph-mode training step of every zoo family is tests/models/test_models.py's)."""

import numpy as np
import pytest

from dlbench.models.counting.mindspore import forward_macs, trainable_parameters
from dlbench.models.lenet import canonical_shapes
from dlbench.models.native.mindspore import predict
from dlbench.models.registry import get_model
from dlbench.models.weights.mindspore import export_weights, import_weights
from tests.utils import lenet_reference


@pytest.fixture(scope="module")
def spec():
    return get_model("lenet5")


def test_network_matches_the_walk_and_the_canonical_names(spec):
    net = spec.build("mindspore", seed=0)
    assert trainable_parameters(net) == spec.parameter_count == 61_706
    assert forward_macs(net, spec) == spec.macs_per_sample == 416_520
    w = export_weights(net)
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)


def test_logits_are_the_numpy_reference(spec):
    net = spec.build("mindspore", seed=3)
    net.set_train(False)
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    got = predict(net, x)
    want = lenet_reference.logits(export_weights(net), x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_import_replaces_every_weight(spec):
    net = spec.build("mindspore", seed=0)
    w = export_weights(spec.build("mindspore", seed=1))
    import_weights(net, w)
    assert all(np.array_equal(export_weights(net)[k], w[k]) for k in w)
