"""Mask R-CNN in PyTorch against the framework-free contract (``models.maskrcnn`` and
its numpy ``reference``): counts and canonical weights, RoIAlign and the loss against
numpy, the packing of the one output, learning through RoIAlign, and the ONNX export
that dlbench runs matching the eager network in ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlbench.converters.base import ExportOptions
from dlbench.converters.onnx_io import input_names
from dlbench.converters.torch_to_onnx import HOP
from dlbench.models import maskrcnn as M
from dlbench.models.counting.pytorch import forward_macs, trainable_parameters
from dlbench.models.maskrcnn import reference as ref
from dlbench.models.maskrcnn.torch import instance_segmentation_loss, roi_align
from dlbench.models.native import pytorch as native
from dlbench.models.registry import get_model
from dlbench.models.weights.pytorch import export_weights, import_weights

MINI = get_model("maskrcnn-mini")
CFG = MINI.config


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread: on a shared, loaded CPU, two threads made these steps ten
    times slower (0.2 s against 2-6 s a batch-4 training step, measured)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _boxes(rng, n, batch, low=4.0, high=124.0, min_side=6.0):
    """(batch, n, 4) float32 boxes inside the image."""
    x0 = rng.uniform(low, high - min_side, (batch, n))
    y0 = rng.uniform(low, high - min_side, (batch, n))
    x1 = rng.uniform(x0 + min_side, high)
    y1 = rng.uniform(y0 + min_side, high)
    return np.stack([x0, y0, x1, y1], -1).astype(np.float32)


def _inputs(rng, batch):
    image = rng.standard_normal((batch, 3, 128, 128)).astype(np.float32)
    return image, _boxes(rng, CFG["rois"], batch), _boxes(rng, CFG["mask_rois"], batch)


def _labels(rng, batch):
    a, c, m = M.num_anchors(CFG), CFG["num_classes"], CFG["mask_size"]
    r, d = CFG["rois"], CFG["mask_rois"]
    f = np.float32
    return (
        rng.choice([-1.0, 0.0, 1.0], (batch, a), p=[0.8, 0.15, 0.05]).astype(f),
        rng.standard_normal((batch, a, 4)).astype(f),
        rng.integers(-1, c, (batch, r)).astype(f),
        rng.standard_normal((batch, r, 4)).astype(f),
        rng.integers(0, c, (batch, d)).astype(f),
        (rng.random((batch, d, m, m)) > 0.5).astype(f),
    )


def test_counts_and_canonical_weights_match_the_contract():
    net = MINI.build("pytorch", seed=0)
    assert trainable_parameters(net) == MINI.parameter_count == 699_585
    assert forward_macs(net, MINI) == MINI.macs_per_sample == 125_513_088
    exported = export_weights(net)
    assert {k: v.shape for k, v in exported.items()} == M.canonical_shapes(CFG)
    assert "backbone.layer1.0.downsample.conv.weight" in exported
    # and they load back by name: the transposed conv's rule included
    other = import_weights(MINI.build("pytorch", seed=1), exported)
    x = _inputs(np.random.default_rng(7), 1)
    np.testing.assert_array_equal(native.predict(other.eval(), x), native.predict(net.eval(), x))


def test_full_size_builds_at_the_published_size():
    spec = get_model("maskrcnn")
    net = spec.build("pytorch")
    assert trainable_parameters(net) == spec.parameter_count == 44_400_693


def test_roi_align_is_the_numpy_reference_at_every_level():
    rng = np.random.default_rng(0)
    sizes = M.level_sizes(CFG)
    maps = [rng.standard_normal((2, 5, sizes[lv], sizes[lv])).astype(np.float32) for lv in M.ROI_LEVELS]
    centre = rng.uniform(-10, 138, (2, 24, 2))
    side = np.exp(rng.uniform(np.log(2.0), np.log(200.0), (2, 24, 2)))
    boxes = np.concatenate([centre - side / 2, centre + side / 2], -1).astype(np.float32)
    boxes[0, :4] = [
        [50, 50, 50, 50],
        [10, 20, 10.5, 20.2],
        [60, 60, 55, 58],  # degenerate
        [-40, -30, -5, -2],
    ]  # outside
    boxes[1, :2] = [[-20, -20, 150, 150], [100, 100, 160, 170]]  # partly out
    levels = ref.roi_levels(boxes, CFG)
    assert set(levels.ravel().tolist()) == set(M.ROI_LEVELS)
    for size in (CFG["box_roi_size"], CFG["mask_roi_size"]):
        got = (
            roi_align([torch.from_numpy(m) for m in maps], torch.from_numpy(boxes), CFG, size)
            .numpy()
            .reshape(2, 24, 5, size, size)
        )
        for i in range(2):
            want = ref.roi_align({lv: m[i] for lv, m in zip(M.ROI_LEVELS, maps)}, boxes[i], CFG, size)
            np.testing.assert_allclose(got[i], want, rtol=0, atol=1e-5)
    assert np.abs(got[0, 3]).max() == 0.0  # wholly outside the map: zeros


def test_roi_align_gradient_reaches_the_maps():
    rng = np.random.default_rng(1)
    sizes = M.level_sizes(CFG)
    maps = [
        torch.from_numpy(rng.standard_normal((1, 2, sizes[lv], sizes[lv]))).requires_grad_()
        for lv in M.ROI_LEVELS
    ]
    boxes = torch.tensor([[[3.0, 5.0, 11.0, 9.0], [10.0, 12.0, 100.0, 90.0]]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda *ms: roi_align(list(ms), boxes, CFG, 3), maps, fast_mode=True)


def test_loss_is_the_numpy_reference():
    rng = np.random.default_rng(2)
    labels = _labels(rng, 3)
    logits = rng.standard_normal((3, M.output_width(CFG))).astype(np.float32)
    z = torch.from_numpy(logits).requires_grad_()
    loss = instance_segmentation_loss(z, tuple(torch.from_numpy(y) for y in labels))
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(ref.loss(logits, labels, CFG), rel=1e-5)
    loss.backward()
    # only the labelled class's mask map is read
    mask = M.split_output(CFG, z.grad.numpy())["mask"]
    cls = labels[4].astype(int)
    touched = np.abs(mask).sum((-1, -2)) > 0
    assert (touched.sum(-1) == (cls > 0)).all()
    # nothing labelled: every count clamps to 1 and the loss is 0, not NaN
    empty = (
        np.full_like(labels[0], -1),
        labels[1],
        np.full_like(labels[2], -1),
        labels[3],
        np.zeros_like(labels[4]),
        labels[5],
    )
    assert instance_segmentation_loss(z, tuple(map(torch.from_numpy, empty))).item() == 0.0


def test_heads_pack_as_output_layout():
    net = MINI.build("pytorch", seed=0).eval()
    a, c = len(M.ASPECT_RATIOS), CFG["num_classes"]
    with torch.no_grad():
        for layer, base in (
            (net.rpn.cls_logits, 100),
            (net.rpn.bbox_pred, 0),
            (net.box_predictor.cls_score, 500),
            (net.box_predictor.bbox_pred, 1000),
        ):
            layer.weight.zero_()
            layer.bias.copy_(base + torch.arange(layer.bias.numel(), dtype=torch.float32))
        y = native.predict(net, _inputs(np.random.default_rng(3), 1))
    parts = M.split_output(CFG, y)
    for lv in M.LEVELS:
        rpn = parts[f"rpn.p{lv}"]
        assert rpn.shape[1:] == (M.level_sizes(CFG)[lv],) * 2 + (a, 5)
        np.testing.assert_array_equal(rpn[0, -1, 0, :, 0], 100 + np.arange(a))
        np.testing.assert_array_equal(rpn[0, 0, -1, :, 1:], np.arange(4 * a).reshape(a, 4))
    box = parts["box"][0]
    np.testing.assert_array_equal(box[:, :c], np.tile(500 + np.arange(c), (CFG["rois"], 1)))
    np.testing.assert_array_equal(box[:, c:], np.tile(1000 + np.arange(4 * c), (CFG["rois"], 1)))


def test_each_part_depends_on_its_own_input():
    net = MINI.build("pytorch", seed=0).eval()
    rng = np.random.default_rng(4)
    image, rois, mask_rois = _inputs(rng, 2)
    base = M.split_output(CFG, native.predict(net, (image, rois, mask_rois)))
    other_rois, other_masks = _boxes(rng, CFG["rois"], 2), _boxes(rng, CFG["mask_rois"], 2)
    for inputs, changed in (
        ((image, other_rois, mask_rois), {"box"}),
        ((image, rois, other_masks), {"mask"}),
        ((image[::-1].copy(), rois, mask_rois), set(base)),
    ):
        new = M.split_output(CFG, native.predict(net, inputs))
        moved = {k for k in base if not np.allclose(new[k], base[k], rtol=0, atol=1e-6)}
        assert moved == changed
    # one image's boxes change only that image's rows
    rois2 = rois.copy()
    rois2[1] = other_rois[1]
    new = M.split_output(CFG, native.predict(net, (image, rois2, mask_rois)))["box"]
    np.testing.assert_array_equal(new[0], base["box"][0])


def test_sgd_lowers_the_loss_through_roi_align():
    torch.manual_seed(0)
    net = MINI.build("pytorch", seed=0).train()
    rng = np.random.default_rng(5)
    x = tuple(map(torch.from_numpy, _inputs(rng, 2)))
    labels = _labels(rng, 2)
    y = tuple(map(torch.from_numpy, labels))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    terms = []
    for step in range(8):
        opt.zero_grad()
        out = net(*x)
        loss = instance_segmentation_loss(out, y)
        loss.backward()
        if step == 0:
            # The heads' losses reach the FPN and the backbone through RoIAlign alone
            # when no anchor is sampled (the stem's weights: each block's last BN
            # starts at gamma 0, which stops its own convs' gradients at first).
            assert net.rpn.conv.weight.grad.abs().sum() > 0
            probe = MINI.build("pytorch", seed=0).train()
            heads_only = (torch.full_like(y[0], -1),) + y[1:]
            instance_segmentation_loss(probe(*x), heads_only).backward()
            assert probe.rpn.conv.weight.grad.abs().sum() == 0
            assert probe.fpn.layer2.weight.grad.abs().sum() > 0
            assert probe.backbone.stem.conv.weight.grad.abs().sum() > 0
        opt.step()
        terms.append(ref.loss_terms(out.detach().numpy(), labels, CFG))
    total = [sum(t.values()) for t in terms]
    assert total[-1] < 0.95 * total[0], total
    for name in ("rpn_objectness", "box_class", "box_delta", "mask"):
        assert terms[-1][name] < terms[0][name], (name, terms)


def test_onnx_export_matches_eager(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    net = MINI.build("pytorch", seed=0).eval()
    out = tmp_path / "maskrcnn.onnx"
    HOP.export(net, MINI, out, ExportOptions())  # dynamic batch, traced at 1
    onnx = pytest.importorskip("onnx")
    (logits,) = onnx.load(str(out)).graph.output
    dims = [d.dim_param or d.dim_value for d in logits.type.tensor_type.shape.dim]
    assert dims == ["batch", M.output_width(CFG)]  # only the batch is symbolic
    x = _inputs(np.random.default_rng(6), 2)
    want = native.predict(net, x)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, dict(zip(input_names(MINI), x)))
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
