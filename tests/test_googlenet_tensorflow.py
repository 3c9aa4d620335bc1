"""GoogLeNet in Keras 3 (NHWC): full-size count, canonical names and a training step.

Counts and MACs against the walk for every zoo model are tests/test_models.py's.
"""
import numpy as np
import pytest
import tensorflow as tf

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


def test_a_training_step_moves_weights_and_bn_statistics():
    import keras
    spec = get_model("googlenet-mini")
    net = spec.build("tensorflow", seed=0)
    before = export_weights(net)
    x = tf.random.normal((4, 32, 32, 3), seed=0)
    opt = keras.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = keras.losses.sparse_categorical_crossentropy(
            tf.constant([0, 1, 2, 3]), net(x, training=True), from_logits=True)
    opt.apply(tape.gradient(loss, net.trainable_variables), net.trainable_variables)
    after = export_weights(net)
    assert {k for k in before if not np.array_equal(before[k], after[k])} == set(before)
