"""SSD300 in PyTorch: the walk conv by conv, the heads' flattening order, the multibox
loss against the numpy reference, and the loss falling on synthetic scenes.

Counts, MACs, output shapes, canonical names and a training step in the session
are tests/models/test_models.py's; transfer is tests/models/test_weights_transfer.py's.
"""

import numpy as np
import pytest
import torch
from torch import nn

from dlbench.models import ssd, synthetic
from dlbench.models.registry import get_model
from dlbench.models.ssd import boxes as B
from dlbench.models.ssd.torch import detection_loss

MINI = get_model("ssd300-mini")


def test_walk_lists_every_conv_in_network_order_with_its_output_size():
    net = MINI.build("pytorch", seed=0).eval()
    seen = []
    hooks = [
        m.register_forward_hook(
            lambda m, _i, out: seen.append(
                ("conv", m.in_channels, m.out_channels, m.kernel_size[0], m.stride[0], out.shape[-1])
            )
        )
        for m in net.modules()
        if isinstance(m, nn.Conv2d)
    ]
    with torch.no_grad():
        y = net(torch.zeros(1, 3, 268, 268))
    for h in hooks:
        h.remove()
    walk = [op for op in ssd.walk(MINI.config) if op[0] == "conv"]
    backbone = len(list(ssd.backbone(MINI.config)))
    assert seen[:backbone] == walk[:backbone]
    # heads run after the backbone, source by source (loc then conf)
    assert sorted(seen[backbone:]) == sorted(walk[backbone:])
    assert net.conv6.dilation == (6, 6) and net.conv6.padding == (6, 6)
    assert y.shape == (1, 7034, 25)


def test_heads_flatten_row_column_box_then_coordinate():
    """prior index (row * W + column) * boxes + box, channel box * 4 + coordinate."""
    net = MINI.build("pytorch", seed=0).eval()
    with torch.no_grad():
        for name, _, cout, _ in ssd.heads(MINI.config):
            head = getattr(net, name)
            head.weight.zero_()
            head.bias.copy_(torch.arange(cout, dtype=torch.float32) + (1000 if name == "conv7_loc" else 0))
        y = net(torch.randn(1, 3, 268, 268))[0].numpy()
    n1 = 34 * 34 * 4
    np.testing.assert_array_equal(y[:n1, :4], np.tile(np.arange(16).reshape(4, 4), (34 * 34, 1)))
    np.testing.assert_array_equal(y[n1 : n1 + 6, :4], 1000 + np.arange(24).reshape(6, 4))
    np.testing.assert_array_equal(y[:4, 4:], np.arange(84).reshape(4, 21))


def test_loss_is_the_numpy_reference_with_hard_negatives():
    ((_, (cls, loc)),) = synthetic.batches(MINI, 3, 1, seed=0)
    cls[2] = 0  # an image with no object
    loc[2] = 0
    z = np.random.default_rng(0).standard_normal(cls.shape + (25,)).astype(np.float32)
    zt = torch.from_numpy(z).requires_grad_()
    loss = detection_loss(zt, (torch.from_numpy(cls), torch.from_numpy(loc)))
    total, pos = B.multibox_loss(z, cls, loc)
    assert float(loss.detach()) == pytest.approx(total / pos, rel=1e-5)
    loss.backward()
    used = (zt.grad[..., 4:].abs().sum(-1) > 0).numpy()
    npos = (cls > 0).sum(1)
    assert used.sum(1).tolist() == [4 * npos[0], 4 * npos[1], 0]  # 3 negatives each


def test_loss_falls_on_synthetic_scenes():
    torch.manual_seed(0)
    net = MINI.build("pytorch", seed=0)
    batches = synthetic.batches(MINI, 2, 2, seed=0)
    opt = torch.optim.SGD(net.parameters(), lr=MINI.default_lr, momentum=0.9)
    losses = []
    for i in range(4):
        x, (cls, loc) = batches[i % 2]
        opt.zero_grad()
        loss = detection_loss(net(torch.from_numpy(x)), (torch.from_numpy(cls), torch.from_numpy(loc)))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses
