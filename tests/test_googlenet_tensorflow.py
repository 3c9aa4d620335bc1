"""GoogLeNet in Keras 3 (NHWC): full-size count and canonical names.

Counts and MACs against the walk, and a training step, for every zoo family are
tests/models/test_models.py's.
"""

import numpy as np
import pytest

from dlbench.models.counting.tensorflow import forward_macs, trainable_parameters
from dlbench.models.googlenet import canonical_shapes
from dlbench.models.registry import get_model
from dlbench.models.weights.tensorflow import export_weights, import_weights


def test_full_size_network_matches_the_walk():
    spec = get_model("googlenet")
    net = spec.build("tensorflow", seed=0)
    assert trainable_parameters(net) == spec.parameter_count == 6_158_346
    assert forward_macs(net, spec) == spec.macs_per_sample


@pytest.mark.parametrize("name", ["googlenet-mini", "googlenet"])
def test_exports_the_canonical_names_and_shapes(name):
    spec = get_model(name)
    w = export_weights(spec.build("tensorflow", seed=0))
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)


def test_import_replaces_every_weight():
    spec = get_model("googlenet-mini")
    net = spec.build("tensorflow", seed=0)
    w = export_weights(spec.build("tensorflow", seed=1))
    import_weights(net, w)
    back = export_weights(net)
    assert all(np.array_equal(back[k], w[k]) for k in w)
