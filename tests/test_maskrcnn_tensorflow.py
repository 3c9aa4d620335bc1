"""Mask R-CNN in Keras 3 against the framework-free contract (``models.maskrcnn``):
counts and canonical weights, RoIAlign and the loss against the numpy reference, the
output's packing, learning through RoIAlign, and the ONNX export.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from dlbench.models import maskrcnn as M
from dlbench.models.counting.tensorflow import forward_macs, trainable_parameters
from dlbench.models.maskrcnn import reference as ref
from dlbench.models.maskrcnn.keras import RoIAlign, instance_segmentation_loss, loss_terms
from dlbench.models.registry import get_model
from dlbench.models.weights.tensorflow import export_weights, import_weights

MINI = get_model("maskrcnn-mini")
CFG = MINI.config
SIZE = CFG["image_size"]


@pytest.fixture(scope="module")
def net():
    return MINI.build("tensorflow", seed=0)


def _boxes(rng, batch, n, lo=2.0, hi=100.0, inside=True):
    centre = rng.uniform(0, SIZE, (batch, n, 2))
    side = np.exp(rng.uniform(np.log(lo), np.log(hi), (batch, n, 2)))
    boxes = np.concatenate([centre - side / 2, centre + side / 2], -1)
    return (np.clip(boxes, 0, SIZE) if inside else boxes).astype(np.float32)


def _inputs(rng, batch=2):
    """NCHW image (the spec's) and boxes inside the image."""
    image = rng.standard_normal((batch, 3, SIZE, SIZE)).astype(np.float32)
    return image, _boxes(rng, batch, CFG["rois"]), _boxes(rng, batch, CFG["mask_rois"])


def _forward(net, image, rois, mask_rois, training=False):
    return net([image.transpose(0, 2, 3, 1), rois, mask_rois], training=training)


def _labels(rng, batch):
    """Random valid labels, with some of every kind (ignored, background, padding)."""
    a, r, d, m, c = (M.num_anchors(CFG), CFG["rois"], CFG["mask_rois"], CFG["mask_size"], CFG["num_classes"])
    f = np.float32
    return (
        rng.choice([-1, 0, 1], (batch, a), p=[0.8, 0.15, 0.05]).astype(f),
        (0.3 * rng.standard_normal((batch, a, 4))).astype(f),
        rng.integers(-1, c, (batch, r)).astype(f),
        (0.3 * rng.standard_normal((batch, r, 4))).astype(f),
        rng.integers(0, c, (batch, d)).astype(f),
        (rng.random((batch, d, m, m)) > 0.5).astype(f),
    )


def test_counts_and_canonical_weights(net):
    assert trainable_parameters(net) == MINI.parameter_count == 699_585
    assert forward_macs(net, MINI) == MINI.macs_per_sample
    assert {k: v.shape for k, v in export_weights(net).items()} == M.canonical_shapes(CFG)
    assert net.output.shape[1:] == (M.output_width(CFG),)
    assert net.get_layer("backbone.layer1.0.downsample.conv") is not None


def test_full_maskrcnn_is_the_published_size():
    """Construction only (no forward): ResNet-50-FPN at 800 px, R = 1000, D = 100."""
    spec = get_model("maskrcnn")
    full = spec.build("tensorflow", seed=0)
    assert trainable_parameters(full) == spec.parameter_count == 44_400_693
    assert forward_macs(full, spec) == spec.macs_per_sample
    keras.backend.clear_session()


def test_transposed_conv_weights_are_pytorchs_layout(net):
    """A canonical (in, out, kH, kW) kernel imported into conv5_mask computes PyTorch's
    ConvTranspose2d (k = stride = 2): out[2i + a, 2j + b, o] = sum_c x[i, j, c] W[c, o, a, b]."""
    rng = np.random.default_rng(3)
    name, layer = "mask_predictor.conv5_mask", net.get_layer("mask_predictor.conv5_mask")
    old = export_weights(net)
    weight = rng.standard_normal(old[f"{name}.weight"].shape).astype(np.float32)
    bias = rng.standard_normal(old[f"{name}.bias"].shape).astype(np.float32)
    import_weights(net, {**old, f"{name}.weight": weight, f"{name}.bias": bias})
    try:
        x = rng.standard_normal((1, 3, 4, weight.shape[0])).astype(np.float32)
        got = np.asarray(layer(x))[0]
        want = np.einsum("ijc,coab->iajbo", x[0], weight).reshape(6, 8, -1) + bias
        np.testing.assert_allclose(got, np.maximum(want, 0), atol=1e-5)
    finally:
        import_weights(net, old)


def test_roi_align_is_the_reference():
    """Boxes on every level, partly or wholly outside the image, tiny and degenerate."""
    rng = np.random.default_rng(1)
    sizes, batch, channels = M.level_sizes(CFG), 2, 5
    maps = {
        lv: rng.standard_normal((batch, sizes[lv], sizes[lv], channels)).astype(np.float32)
        for lv in M.ROI_LEVELS
    }
    parts = [
        _boxes(rng, batch, 6, lo, hi, inside=False) for lo, hi in ((1, 15), (20, 33), (40, 65), (80, 200))
    ]
    odd = np.array(
        [
            [5, 5, 5, 5],
            [10, 20, 8, 3],
            [-40, -40, -20, -20],
            [130, 0, 180, 50],
            [-3, -3, 2, 2],
            [0, 0, 128, 128],
            [60, 60, 60.3, 60.2],
            [120, 100, 140, 140],
        ],
        np.float32,
    )
    boxes = np.concatenate(parts + [np.broadcast_to(odd, (batch, *odd.shape))], 1)
    assert set(ref.roi_levels(boxes, CFG).ravel()) == set(M.ROI_LEVELS)
    for size in (CFG["box_roi_size"], CFG["mask_roi_size"]):
        layer = RoIAlign(size, CFG["sampling_ratio"], CFG["canonical_size"])
        got = layer([tf.constant(maps[lv]) for lv in M.ROI_LEVELS] + [tf.constant(boxes)])
        got = np.asarray(got).transpose(0, 1, 4, 2, 3)  # NHWC -> (N, C, S, S)
        for b in range(batch):
            want = ref.roi_align(
                {lv: maps[lv][b].transpose(2, 0, 1) for lv in M.ROI_LEVELS}, boxes[b], CFG, size
            )
            assert np.abs(got[b] - want).max() <= 1e-5


def test_loss_is_the_reference():
    rng = np.random.default_rng(2)
    labels = _labels(rng, 3)
    labels[4][2] = 0  # an image with no mask box
    logits = rng.standard_normal((3, M.output_width(CFG))).astype(np.float32)
    got = {k: float(v) for k, v in loss_terms(tf.constant(logits), labels).items()}
    want = ref.loss_terms(logits, labels, CFG)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-5), k
    total = float(instance_segmentation_loss(tf.constant(logits), labels))
    assert total == pytest.approx(ref.loss(logits, labels, CFG), rel=1e-5)


def test_output_parts_depend_on_their_inputs_only(net):
    rng = np.random.default_rng(4)
    image, rois, mask_rois = _inputs(rng)
    base = M.split_output(CFG, np.asarray(_forward(net, image, rois, mask_rois)))
    changed = {
        "rois": _forward(net, image, _boxes(rng, 2, CFG["rois"]), mask_rois),
        "mask_rois": _forward(net, image, rois, _boxes(rng, 2, CFG["mask_rois"])),
        "image": _forward(net, rng.standard_normal(image.shape).astype(np.float32), rois, mask_rois),
    }
    moved = {"rois": {"box"}, "mask_rois": {"mask"}, "image": set(base)}
    for what, out in changed.items():
        parts = M.split_output(CFG, np.asarray(out))
        assert {k for k in base if not np.array_equal(base[k], parts[k])} == moved[what], what


def test_output_packing_follows_output_layout(net):
    """Zero kernels and counting biases in the last layers: each part reads back as
    ``output_layout`` says (anchor a's objectness then deltas; class logits then
    class-major deltas; one map per class)."""
    a, c = len(M.ASPECT_RATIOS), CFG["num_classes"]
    old = export_weights(net)
    new = dict(old)
    for name, n in (
        ("rpn.cls_logits", a),
        ("rpn.bbox_pred", 4 * a),
        ("box_predictor.cls_score", c),
        ("box_predictor.bbox_pred", 4 * c),
        ("mask_predictor.mask_fcn_logits", c),
    ):
        new[f"{name}.weight"] = np.zeros_like(old[f"{name}.weight"])
        new[f"{name}.bias"] = np.arange(n, dtype=np.float32) + (100 if "bbox" in name else 0)
    import_weights(net, new)
    try:
        parts = M.split_output(CFG, np.asarray(_forward(net, *_inputs(np.random.default_rng(5)))))
    finally:
        import_weights(net, old)
    for lv in M.LEVELS:
        rpn = parts[f"rpn.p{lv}"]
        np.testing.assert_array_equal(rpn[..., 0], np.broadcast_to(np.arange(a), rpn.shape[:-1]))
        np.testing.assert_array_equal(rpn[0, 0, 0, :, 1:], 100 + np.arange(4 * a).reshape(a, 4))
    np.testing.assert_array_equal(parts["box"][1, 3], np.r_[np.arange(c), 100 + np.arange(4 * c)])
    np.testing.assert_array_equal(parts["mask"][1, 2, :, 5, 7], np.arange(c))


def test_sgd_steps_lower_the_loss():
    """Learning works end to end on one batch, and the mask loss alone reaches the
    backbone (its only path is through RoIAlign).  Eager steps: tracing the step as a
    tf.function costs more here than the five steps."""
    keras.backend.clear_session()
    model = MINI.build("tensorflow", seed=0)
    rng = np.random.default_rng(6)
    image, rois, mask_rois = _inputs(rng)
    x = [tf.constant(image.transpose(0, 2, 3, 1)), tf.constant(rois), tf.constant(mask_rois)]
    labels = tuple(tf.constant(t) for t in _labels(rng, 2))
    optimizer = keras.optimizers.SGD(0.02, momentum=0.9)
    stem = model.get_layer("backbone.stem.conv").kernel
    losses = []
    for i in range(5):
        with tf.GradientTape(persistent=i == 0) as tape:
            terms = loss_terms(model(x, training=True), labels)
            loss = tf.add_n(list(terms.values()))
        if i == 0:
            assert np.abs(tape.gradient(terms["mask"], stem).numpy()).sum() > 0
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        losses.append(float(loss))
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.95 * losses[0], losses


def test_onnx_export_matches_keras(net, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from dlbench.converters.base import ExportOptions
    from dlbench.converters.keras_to_onnx import HOP

    out = tmp_path / "maskrcnn-mini.onnx"
    HOP.export(net, MINI, out, ExportOptions())
    image, rois, mask_rois = _inputs(np.random.default_rng(7))
    want = np.asarray(_forward(net, image, rois, mask_rois))
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"image": image, "rois": rois, "mask_rois": mask_rois})
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * max(np.abs(want).max(), 1.0)
    assert math.prod(got.shape[1:]) == M.output_width(CFG)
