"""Pre-export rewrites really change what a MindSpore network computes.

``SequentialCell.construct`` iterates a cached ``cell_list``: a rewrite that
only replaced ``_cells`` left the old cell running.  And BERT's family hook
must replace every exact GELU (whose ``Erf`` the ONNX exporter cannot convert)
without changing the network's outputs beyond float32 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")
from mindspore import nn

from dlbench.converters.mindspore_to_onnx import ZeroPadMaxPool, family_onnx_rewrites, rewrite_padded_pools
from dlbench.models.registry import get_model


def _padded_pool_net():
    net = nn.SequentialCell([nn.MaxPool2d(kernel_size=3, stride=2, pad_mode="pad", padding=1)])
    net.set_train(False)
    return net


def test_padded_pool_inside_a_sequential_cell_is_replaced_for_real():
    x = ms.Tensor(-np.ones((1, 1, 4, 4), np.float32))  # negative: a zero pad wins at edges
    # "Before" from a twin: in GRAPH_MODE (set by earlier tests in this process) a
    # cell that has run keeps its compiled graph, which would hide the rewrite.
    before = _padded_pool_net()(x).asnumpy()
    net = _padded_pool_net()
    assert rewrite_padded_pools(net) == ["0"]
    assert isinstance(net.cell_list[0], ZeroPadMaxPool)
    after = net(x).asnumpy()
    assert before.shape == after.shape
    assert (before == -1).all() and (after == 0).any()  # the new cell is the one that runs


def test_bert_family_hook_replaces_every_exact_gelu_and_keeps_outputs():
    from dlbench.models.bert import example_inputs
    from dlbench.models.native.mindspore import predict

    spec = get_model("bert-tiny")
    net = spec.build("mindspore", seed=0)
    net.set_train(False)
    x = example_inputs(spec.config, 2, seed=1)
    before = predict(net, x)
    rewrites = family_onnx_rewrites(spec, net)
    assert len(rewrites) == spec.config["layers"]
    assert all("ErfFreeGELU" in r for r in rewrites)
    assert not [
        c for _, c in net.cells_and_names() if isinstance(c, nn.GELU) and c.approximate in ("none", False)
    ]
    np.testing.assert_allclose(predict(net, x), before, atol=1e-5)
    assert family_onnx_rewrites(get_model("resnet50-mini"), net) == []
