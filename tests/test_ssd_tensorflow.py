"""SSD300 in Keras 3: the padding spelled out per layer (every map the size the walk
says), the heads' flattening order, and the multibox loss against numpy.

Counts, canonical names and a training step in the session are tests/models/test_models.py's.
"""

import numpy as np
import pytest
import tensorflow as tf

from dlbench.models import ssd, synthetic
from dlbench.models.registry import get_model
from dlbench.models.ssd import boxes as B
from dlbench.models.ssd.keras import detection_loss

MINI = get_model("ssd300-mini")


@pytest.fixture(scope="module")
def net():
    return MINI.build("tensorflow", seed=0)


def test_every_conv_has_the_walks_output_size(net):
    for name, _, cout, _, _, _, _, hw in ssd.backbone(MINI.config):
        assert tuple(net.get_layer(name).output.shape[1:]) == (hw, hw, cout), name
    assert net.get_layer("conv6").dilation_rate == (6, 6)
    assert net.output.shape[1:] == (7034, 25)


def test_heads_flatten_row_column_box_then_coordinate(net):
    for name, _, cout, _ in ssd.heads(MINI.config):
        layer = net.get_layer(name)
        kernel, _ = layer.get_weights()
        layer.set_weights(
            [np.zeros_like(kernel), np.arange(cout, dtype=np.float32) + (1000 if name == "conv7_loc" else 0)]
        )
    y = net(np.random.default_rng(0).standard_normal((1, 268, 268, 3)).astype(np.float32))
    y = np.asarray(y)[0]
    n1 = 34 * 34 * 4
    np.testing.assert_array_equal(y[:n1, :4], np.tile(np.arange(16).reshape(4, 4), (34 * 34, 1)))
    np.testing.assert_array_equal(y[n1 : n1 + 6, :4], 1000 + np.arange(24).reshape(6, 4))
    np.testing.assert_array_equal(y[:4, 4:], np.arange(84).reshape(4, 21))


def test_loss_is_the_numpy_reference_with_hard_negatives():
    ((_, (cls, loc)),) = synthetic.batches(MINI, 3, 1, seed=0)
    cls[2], loc[2] = 0, 0
    z = tf.Variable(np.random.default_rng(0).standard_normal(cls.shape + (25,)).astype(np.float32))
    with tf.GradientTape() as tape:
        loss = detection_loss(z, (tf.constant(cls), tf.constant(loc)))
    total, pos = B.multibox_loss(z.numpy(), cls, loc)
    assert float(loss) == pytest.approx(total / pos, rel=1e-5)
    used = np.abs(tape.gradient(loss, z).numpy()[..., 4:]).sum(-1) > 0
    npos = (cls > 0).sum(1)
    assert used.sum(1).tolist() == [4 * npos[0], 4 * npos[1], 0]
