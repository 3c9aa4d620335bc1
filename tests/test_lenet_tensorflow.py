"""LeNet-5 in Keras 3 (NHWC): counts, canonical names, and the flatten order.

Keras computes channels-last; the builder permutes the feature map to
channels-first before flattening so that ``fc1`` reads its inputs in
PyTorch's order.  The numpy reference (tests/utils/lenet_reference.py) flattens
(C, H, W): equal logits from the same canonical weights prove the order.
"""

import numpy as np
import pytest

from dlbench.models.counting.tensorflow import forward_macs, trainable_parameters
from dlbench.models.lenet import canonical_shapes
from dlbench.models.native.tensorflow import predict
from dlbench.models.registry import get_model
from dlbench.models.weights.tensorflow import export_weights, import_weights
from tests.utils import lenet_reference


@pytest.fixture(scope="module")
def spec():
    return get_model("lenet5")


def test_network_matches_the_walk_and_the_canonical_names(spec):
    net = spec.build("tensorflow", seed=0)
    assert trainable_parameters(net) == spec.parameter_count == 61_706
    assert forward_macs(net, spec) == spec.macs_per_sample == 416_520
    w = export_weights(net)
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)
    assert net.input_shape == (None, 32, 32, 1)


def test_logits_are_the_numpy_reference(spec):
    net = spec.build("tensorflow", seed=3)
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    got = predict(net, x)  # NCHW in, transposed inside
    want = lenet_reference.logits(export_weights(net), x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_an_nhwc_flatten_would_be_caught(spec):
    """The reference is sensitive to the order: fc1's rows permuted to NHWC order
    change the logits (so the test above could fail)."""
    w = export_weights(spec.build("tensorflow", seed=3))
    x = np.random.default_rng(0).standard_normal((3, 1, 32, 32)).astype(np.float32)
    nhwc = dict(w)
    rows = w["fc1.weight"].reshape(120, 16, 5, 5).transpose(0, 2, 3, 1)
    nhwc["fc1.weight"] = rows.reshape(120, 400)
    assert np.abs(lenet_reference.logits(nhwc, x) - lenet_reference.logits(w, x)).max() > 1e-3


def test_import_replaces_every_weight(spec):
    net = spec.build("tensorflow", seed=0)
    w = export_weights(spec.build("tensorflow", seed=1))
    import_weights(net, w)
    assert all(np.array_equal(export_weights(net)[k], w[k]) for k in w)
