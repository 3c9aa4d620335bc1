"""SSD300 in MindSpore: the heads' flattening order, pool3's rounding up as a pad,
and the multibox loss (graph mode, as training compiles it) against numpy.

Counts, canonical names and a training step in the session are tests/models/test_models.py's.
"""

import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
import pytest

from dlbench.models import ssd, synthetic
from dlbench.models.registry import get_model
from dlbench.models.ssd import boxes as B
from dlbench.models.ssd.mindspore import DetectionLoss

MINI = get_model("ssd300-mini")


def test_heads_flatten_row_column_box_then_coordinate():
    net = MINI.build("mindspore", seed=0)
    net.set_train(False)
    for name, _, cout, _ in ssd.heads(MINI.config):
        head = getattr(net, name)
        head.weight.set_data(ms.Tensor(np.zeros(head.weight.shape, np.float32)))
        head.bias.set_data(
            ms.Tensor(np.arange(cout, dtype=np.float32) + (1000 if name == "conv7_loc" else 0))
        )
    x = np.random.default_rng(0).standard_normal((1, 3, 268, 268)).astype(np.float32)
    y = net(ms.Tensor(x)).asnumpy()[0]
    n1 = 34 * 34 * 4
    np.testing.assert_array_equal(y[:n1, :4], np.tile(np.arange(16).reshape(4, 4), (34 * 34, 1)))
    np.testing.assert_array_equal(y[n1 : n1 + 6, :4], 1000 + np.arange(24).reshape(6, 4))
    np.testing.assert_array_equal(y[:4, 4:], np.arange(84).reshape(4, 21))
    # conv3_3's 67x67 map pools to 34 (ceil), as PyTorch's ceil_mode does
    assert net.pool3.pad.paddings == ((0, 0), (0, 0), (0, 1), (0, 1))


def test_loss_is_the_numpy_reference_in_graph_mode():
    ((_, (cls, loc)),) = synthetic.batches(MINI, 3, 1, seed=0)
    cls[2], loc[2] = 0, 0
    z = np.random.default_rng(0).standard_normal(cls.shape + (25,)).astype(np.float32)
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        loss = float(DetectionLoss()(ms.Tensor(z), ms.Tensor(cls), ms.Tensor(loc)).asnumpy())
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    total, pos = B.multibox_loss(z, cls, loc)
    assert loss == pytest.approx(total / pos, rel=1e-5)
