"""Mask R-CNN in MindSpore, in GRAPH_MODE as the zoo's sessions compile it: counts and
canonical weights, RoIAlign and the loss against ``models.maskrcnn.reference``, which
inputs each output part depends on, SGD learning through RoIAlign, the transposed
conv's depth-to-space form, and the ONNX file (``converters.mindspore_to_onnx``)
against the network at the traced batch and another."""

import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from dlbench.models import maskrcnn as M
from dlbench.models.counting.mindspore import forward_macs, trainable_parameters
from dlbench.models.maskrcnn import reference as ref
from dlbench.models.maskrcnn.mindspore import Deconv2x2, InstanceSegmentationLoss, RoIAlign
from dlbench.models.registry import get_model
from dlbench.models.weights.mindspore import export_weights, import_weights

MINI = get_model("maskrcnn-mini")
CFG = MINI.config


@pytest.fixture(autouse=True)
def graph_mode():
    mode = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=mode)


def _boxes(rng, batch, n, lo=2.0, hi=100.0, inside=True):
    """Boxes of sides lo..hi (log-uniform), inside the image or around it."""
    s = CFG["image_size"]
    wh = np.exp(rng.uniform(np.log(lo), np.log(hi), (batch, n, 2)))
    if inside:
        x0 = rng.uniform(0, 1, (batch, n, 2)) * (s - wh)
        return np.concatenate([x0, x0 + wh], -1).astype(np.float32)
    c = rng.uniform(-20, s + 20, (batch, n, 2))
    return np.concatenate([c - wh / 2, c + wh / 2], -1).astype(np.float32)


def _inputs(rng, batch):
    image = rng.standard_normal((batch, 3, CFG["image_size"], CFG["image_size"]))
    return (image.astype(np.float32), _boxes(rng, batch, CFG["rois"]), _boxes(rng, batch, CFG["mask_rois"]))


def _labels(rng, batch):
    a, r, d = M.num_anchors(CFG), CFG["rois"], CFG["mask_rois"]
    c, m = CFG["num_classes"], CFG["mask_size"]
    mask_cls = rng.integers(0, c, (batch, d))
    mask_cls[:, 0] = 1  # at least one mask per image
    return (
        rng.choice([-1.0, 0.0, 1.0], (batch, a), p=[0.8, 0.15, 0.05]).astype(np.float32),
        (0.3 * rng.standard_normal((batch, a, 4))).astype(np.float32),
        rng.integers(-1, c, (batch, r)).astype(np.float32),
        (0.3 * rng.standard_normal((batch, r, 4))).astype(np.float32),
        mask_cls.astype(np.float32),
        (rng.random((batch, d, m, m)) > 0.5).astype(np.float32),
    )


def test_counts_and_canonical_weights_are_the_contracts():
    net = MINI.build("mindspore", seed=0)
    assert trainable_parameters(net) == MINI.params_fn(MINI) == 699_585
    assert forward_macs(net, MINI) == MINI.macs_fn(MINI)
    weights = export_weights(net)
    shapes = M.canonical_shapes(CFG)
    assert list(weights) == list(shapes)
    assert {k: v.shape for k, v in weights.items()} == shapes
    full = get_model("maskrcnn")
    assert trainable_parameters(full.build("mindspore")) == full.params_fn(full) == 44_400_693


@pytest.mark.parametrize("rows", [True, False], ids=["gather", "gather_elements"])
def test_roi_align_is_the_reference_at_every_level_outside_and_degenerate(rows):
    """Both forms: row gathers (MindSpore runs) and GatherElements (the ONNX export's)."""
    rng = np.random.default_rng(1)
    sizes, channels, batch = M.level_sizes(CFG), 5, 2
    maps = [
        {lv: rng.standard_normal((channels, sizes[lv], sizes[lv])).astype(np.float32) for lv in M.ROI_LEVELS}
        for _ in range(batch)
    ]
    flat = np.stack([np.concatenate([m[lv].reshape(channels, -1).T for lv in M.ROI_LEVELS]) for m in maps])
    boxes = np.concatenate(
        [_boxes(rng, batch, 24, 0.5, 180, inside=False), _boxes(rng, batch, 8, 80, 200, inside=False)], 1
    )
    boxes[:, 0] = (3, 3, 3, 3)  # empty
    boxes[:, 1] = (30, 40, 20, 35)  # inverted
    boxes[:, 2] = (-300, -300, -200, -250)  # wholly outside: zeros
    levels = ref.roi_levels(boxes, CFG)
    assert set(levels.ravel()) == set(M.ROI_LEVELS)
    for size in (CFG["box_roi_size"], CFG["mask_roi_size"]):
        roi = RoIAlign(CFG, size)
        roi.rows = rows
        got = roi(ms.Tensor(flat), ms.Tensor(boxes)).asnumpy()
        want = np.stack([ref.roi_align(maps[b], boxes[b], CFG, size) for b in range(batch)])
        assert got.shape == (batch, boxes.shape[1], channels, size, size)
        assert np.abs(got - want).max() <= 1e-5
        assert not got[:, 2].any() and np.abs(got[:, 3:]).max() > 0.1


def test_loss_is_the_numpy_reference():
    rng = np.random.default_rng(2)
    logits = (2 * rng.standard_normal((3, M.output_width(CFG)))).astype(np.float32)
    labels = _labels(rng, 3)
    got = float(InstanceSegmentationLoss()(ms.Tensor(logits), *map(ms.Tensor, labels)).asnumpy())
    terms = ref.loss_terms(logits, labels, CFG)
    assert all(v > 0 for v in terms.values())
    assert got == pytest.approx(sum(terms.values()), rel=1e-5)


def test_each_output_part_depends_on_its_own_inputs():
    rng = np.random.default_rng(3)
    net = MINI.build("mindspore", seed=0)
    net.set_train(False)
    image, rois, mask_rois = _inputs(rng, 2)

    def parts(*x):
        out = net(*map(ms.Tensor, x)).asnumpy()
        assert out.shape == (2, M.output_width(CFG)) and out.dtype == np.float32
        p = M.split_output(CFG, out)
        return (np.concatenate([p[f"rpn.p{lv}"].reshape(2, -1) for lv in M.LEVELS], 1), p["box"], p["mask"])

    base = parts(image, rois, mask_rois)
    changed = {
        "rois": parts(image, rois[:, ::-1].copy(), mask_rois),
        "mask_rois": parts(image, rois, mask_rois[:, ::-1].copy()),
        "image": parts(-image, rois, mask_rois),
    }
    moves = {k: [not np.array_equal(a, b) for a, b in zip(base, v)] for k, v in changed.items()}
    assert moves == {
        "rois": [False, True, False],
        "mask_rois": [False, False, True],
        "image": [True, True, True],
    }
    # Reversing the boxes reverses the rows: boxes are read independently.
    np.testing.assert_allclose(changed["rois"][1][:, ::-1], base[1], rtol=1e-5, atol=1e-5)


class _Objective(nn.Cell):
    def __init__(self, net):
        super().__init__(auto_prefix=False)
        self.net, self.loss = net, InstanceSegmentationLoss()

    def construct(self, image, rois, mask_rois, *labels):
        return self.loss(self.net(image, rois, mask_rois), *labels)


def test_sgd_steps_on_one_batch_lower_the_loss_through_roi_align():
    """No anchor is sampled (RPN labels -1, so both RPN terms are 0): the backbone and
    FPN learn only through RoIAlign's gathers into the box and mask heads."""
    rng = np.random.default_rng(4)
    net = MINI.build("mindspore", seed=0)
    before = net.backbone.stem.conv.weight.asnumpy().copy()
    labels = _labels(rng, 2)
    labels[0][:] = -1
    batch = [ms.Tensor(a) for a in (*_inputs(rng, 2), *labels)]
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.02, momentum=0.9)
    step = nn.TrainOneStepCell(_Objective(net), opt)
    step.set_train()
    losses = [float(step(*batch).asnumpy()) for _ in range(10)]
    assert np.isfinite(losses).all() and losses[-1] < 0.9 * losses[0], losses
    assert np.abs(net.backbone.stem.conv.weight.asnumpy() - before).max() > 0


def test_depth_to_space_form_is_the_transposed_conv():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    rng = np.random.default_rng(5)
    ours = Deconv2x2(6, 5, "normal")
    ours.bias.set_data(ms.Tensor(rng.standard_normal(5).astype(np.float32)))
    native = nn.Conv2dTranspose(6, 5, 2, stride=2, has_bias=True)
    native.weight.set_data(ours.weight.data.copy())
    native.bias.set_data(ours.bias.data.copy())
    x = ms.Tensor(rng.standard_normal((3, 6, 4, 5)).astype(np.float32))
    np.testing.assert_allclose(ours(x).asnumpy(), native(x).asnumpy(), rtol=1e-5, atol=1e-5)


def test_onnx_file_computes_the_network_at_any_batch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from dlbench.converters import onnx_io
    from dlbench.converters.base import ExportOptions
    from dlbench.converters.mindspore_to_onnx import HOP

    net = MINI.build("mindspore", seed=0)
    built = MINI.build("mindspore")  # the verifier's: as built
    import_weights(built, export_weights(net))
    built.set_train(False)
    out = tmp_path / "maskrcnn.onnx"
    record = HOP.export(net, MINI, out, ExportOptions())
    assert [r.split(":")[0] for r in record["rewrites"]] == ["backbone.stem.pool", "box_roi", "mask_roi"]
    model = onnx_io.load(out)
    onnx_io.normalize_io(model)
    onnx_io.save(model, out)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(out), options)
    assert [i.name for i in session.get_inputs()] == ["image", "rois", "mask_rois"]
    rng = np.random.default_rng(6)
    for batch in (2, 3):  # traced at 2
        x = _inputs(rng, batch)
        want = built(*map(ms.Tensor, x)).asnumpy()
        got = session.run(None, dict(zip(("image", "rois", "mask_rois"), x)))[0]
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
