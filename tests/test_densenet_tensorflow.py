"""DenseNet-121 in Keras 3 (NHWC): its init and a training step.

Counts, MACs and canonical weight names of every zoo model are tests/test_models.py's, weight
import and export across frameworks tests/test_weights_transfer.py's.
"""
import numpy as np
import tensorflow as tf

from dlbench.models.registry import get_model
from dlbench.models.weights.tensorflow import export_weights


def test_starts_from_torchvisions_init():
    w = export_weights(get_model("densenet121-mini").build("tensorflow", seed=0))
    conv = w["block3.layer24.conv1.weight"]            # fan_in 248, as in PyTorch's layout
    assert abs(conv.std() / np.sqrt(2 / 248) - 1) < 0.1
    bns = {k[: -len(".running_var")] for k in w if k.endswith(".running_var")}
    assert all((w[f"{b}.weight"] == 1).all() and not w[f"{b}.bias"].any() for b in bns)
    assert not w["fc.bias"].any() and np.abs(w["fc.weight"]).max() <= 1 / np.sqrt(256)


def test_a_training_step_moves_weights_and_bn_statistics():
    import keras
    spec = get_model("densenet121-mini")
    net = spec.build("tensorflow", seed=0)
    before = export_weights(net)
    x = tf.random.normal((4, 64, 64, 3), seed=0)
    opt = keras.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = keras.losses.sparse_categorical_crossentropy(
            tf.constant([0, 1, 2, 3]), net(x, training=True), from_logits=True)
    opt.apply(tape.gradient(loss, net.trainable_variables), net.trainable_variables)
    after = export_weights(net)
    assert {k for k in before if not np.array_equal(before[k], after[k])} == set(before)
