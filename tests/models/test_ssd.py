"""SSD300: the framework-free parts (the spec's sizes, the priors, matching, the numpy
multibox loss, post-processing, synthetic data, the held-out tally and the VOC and COCO
readers, on tiny trees written here), and in every framework the heads' flattening
order and the multibox loss against the numpy reference; PyTorch's walk conv by conv
and its loss falling on synthetic scenes, Keras' padding spelled out per layer (every
map the size the walk says), MindSpore's pool3 rounding up as a pad.

Counts, MACs, output shapes, canonical names and a training step in the session
are tests/models/test_models.py's; transfer is tests/models/test_weights_transfer.py's.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlbench.models import ssd, synthetic
from dlbench.models.registry import get_model
from dlbench.models.ssd import boxes as B
from tests.utils.frameworks import frameworks

SSD300 = get_model("ssd300")
MINI = get_model("ssd300-mini")


def test_ssd300_is_the_published_network():
    """ssd.pytorch's VOC SSD300 has 26,285,486 parameters; maps 38/19/10/5/3/1 with
    4/6/6/6/4/4 boxes give 8,732 priors."""
    cfg = SSD300.config
    assert SSD300.parameter_count == 26_285_486
    assert SSD300.macs_per_sample == 31_373_537_792
    assert [(s, hw, a) for s, _, hw, a in ssd.sources(cfg)] == [
        ("conv4_3", 38, 4),
        ("conv7", 19, 6),
        ("conv8_2", 10, 6),
        ("conv9_2", 5, 6),
        ("conv10_2", 3, 4),
        ("conv11_2", 1, 4),
    ]
    assert ssd.output_shape(cfg) == (8732, 25)
    assert [hw for *_, hw in ssd.backbone(cfg)][:13:3] == [300, 150, 75, 38, 19]
    mini = MINI.config
    assert [hw for _, _, hw, _ in ssd.sources(mini)] == [34, 17, 9, 5, 3, 1]
    assert ssd.output_shape(mini) == (7034, 25) and MINI.inputs[0].shape == (3, 268, 268)


def test_priors_follow_the_paper_in_map_row_column_box_order():
    p = B.priors(SSD300.config)
    assert p.shape == (8732, 4) and p.dtype == np.float32
    # First cell of conv4_3: scale 0.1, sqrt(0.1 * 0.2), then ratio 2 and 1/2.
    r = np.sqrt(2)
    np.testing.assert_allclose(
        p[:4],
        [
            [0.5 / 38, 0.5 / 38, 0.1, 0.1],
            [0.5 / 38, 0.5 / 38, np.sqrt(0.02), np.sqrt(0.02)],
            [0.5 / 38, 0.5 / 38, 0.1 * r, 0.1 / r],
            [0.5 / 38, 0.5 / 38, 0.1 / r, 0.1 * r],
        ],
        rtol=1e-6,
    )
    assert p[4, 0] == pytest.approx(1.5 / 38) and p[4, 1] == pytest.approx(0.5 / 38)
    assert p[4 * 38, 1] == pytest.approx(1.5 / 38)  # next row after 38 columns
    conv7 = p[38 * 38 * 4 : 38 * 38 * 4 + 6]
    np.testing.assert_allclose(
        conv7[4:, 2:], [[0.2 * np.sqrt(3), 0.2 / np.sqrt(3)], [0.2 / np.sqrt(3), 0.2 * np.sqrt(3)]], rtol=1e-6
    )
    np.testing.assert_allclose(p[-4:, :2], 0.5)
    np.testing.assert_allclose(p[-4, 2:], 0.88)


def test_match_encode_decode_round_trip():
    pri = B.priors(MINI.config)
    gt = np.array([[0.1, 0.1, 0.5, 0.6], [0.6, 0.55, 0.95, 0.9]])
    cls, loc = B.match(gt, np.array([3, 7]), pri, 0.5)
    assert set(np.unique(cls)) == {0, 3, 7}
    overlap = B.iou(gt, B.corners(pri))
    # every object owns its best prior, and every prior over 0.5 is positive
    assert cls[overlap.argmax(1)].tolist() == [3, 7]
    assert ((overlap.max(0) >= 0.5) <= (cls > 0)).all()
    back = B.decode(loc[cls > 0], pri[cls > 0])
    truth = gt[(cls[cls > 0] == 7).astype(int)]
    np.testing.assert_allclose(back, truth, atol=1e-5)
    assert not loc[cls == 0].any()
    empty = B.match(np.zeros((0, 4)), np.zeros(0), pri)
    assert not empty[0].any() and not empty[1].any()


def test_multibox_loss_mines_three_negatives_per_positive():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 50, 25))
    cls = np.zeros((2, 50))
    cls[0, :5] = 2  # 5 positives: 15 hardest negatives
    loc = rng.standard_normal((2, 50, 4))
    total, pos = B.multibox_loss(z, cls, loc)
    assert pos == 5
    lse = np.log(np.exp(z[..., 4:]).sum(-1))
    ce = lse - z[..., 4 + 2] * (cls > 0) - z[..., 4] * (cls == 0)
    hard = np.sort(lse[0, 5:] - z[0, 5:, 4])[::-1][:15].sum()
    d = np.abs(z[0, :5, :4] - loc[0, :5])
    smooth = np.where(d < 1, 0.5 * d * d, d - 0.5).sum()
    assert total == pytest.approx(ce[0, :5].sum() + hard + smooth)


def test_detect_decodes_and_suppresses_per_class():
    cfg = MINI.config
    pri = B.priors(cfg)
    gt = np.array([[0.2, 0.2, 0.6, 0.7]])
    cls, loc = B.match(gt, np.array([4]), pri)
    logits = np.zeros((1, len(pri), 25), np.float32)
    logits[0, :, :4] = loc
    logits[0, :, 4] = 5.0  # background everywhere ...
    logits[0, cls > 0, 4 + 4] = 10.0  # ... but class 4 on its priors
    boxes, scores, classes = B.detect(logits, cfg, score_threshold=0.5)[0]
    assert classes.tolist() == [4] and scores[0] > 0.99  # NMS left one box
    np.testing.assert_allclose(boxes[0], gt[0], atol=1e-5)
    three = np.array([[0, 0, 1, 1], [0, 0, 1, 0.9], [2, 2, 3, 3]], float)
    keep = B.nms(three, np.array([0.9, 0.8, 0.7]), 0.5)
    assert keep.tolist() == [0, 2]
    # SSD's cap counts candidates before suppression; Detectron's (Mask R-CNN) counts
    # boxes kept: the suppressed second box uses up a candidate, not a kept place.
    assert B.nms(three, np.array([0.9, 0.8, 0.7]), 0.5, candidates=2).tolist() == [0]
    assert B.nms(three, np.array([0.9, 0.8, 0.7]), 0.5, top_k=2).tolist() == [0, 2]
    assert B.iou(np.array([[1, 1, 0, 0.0]]), np.array([[1, 1, 0, 0.0]])).tolist() == [[0.0]]


def test_synthetic_batches_are_matched_scenes_in_either_layout():
    ((x, (cls, loc)),) = synthetic.batches(MINI, 3, 1, seed=1)
    ((xh, (cls2, _)),) = synthetic.batches(MINI, 3, 1, seed=1, layout="NHWC")
    assert x.shape == (3, 3, 268, 268) and xh.shape == (3, 268, 268, 3)
    np.testing.assert_array_equal(x.transpose(0, 2, 3, 1), xh)
    np.testing.assert_array_equal(cls, cls2)
    assert cls.shape == (3, 7034) and loc.shape == (3, 7034, 4) and cls.dtype == np.float32
    assert ((cls > 0).sum(1) > 0).all() and cls.max() <= 6


def test_detection_tally_scores_a_perfect_and_a_wrong_detector():
    from dlbench.harness.evaluate.scoring import tally_for

    ((_, (cls, loc)),) = synthetic.batches(MINI, 4, 1, seed=2)
    perfect = np.zeros(cls.shape + (25,), np.float32)
    perfect[..., :4] = loc
    perfect[..., 4] = 5.0
    rows, cols = np.nonzero(cls)
    perfect[rows, cols, 4 + cls[rows, cols].astype(int)] = 20.0
    tally = tally_for("detection", MINI)
    tally.add((perfect,), (cls, loc))
    r = tally.result()
    assert r["accuracy"] == 1.0 and r["mean_top_iou"] > 0.999 and r["samples"] == 4
    # Every object found once (its priors' copies suppressed), nothing else: COCO AP 1.
    assert r["map"] == pytest.approx(1.0) and r["map50"] == pytest.approx(1.0)
    wrong = perfect.copy()
    wrong[rows, cols, 4 + cls[rows, cols].astype(int)] = 0.0
    wrong[rows, cols, 4 + 20] = 20.0  # class 20 is never drawn
    tally = tally_for("detection", MINI)
    tally.add(wrong, (cls, loc))
    assert tally.result()["accuracy"] == 0.0 and tally.result()["loss"] > r["loss"]
    assert tally.result()["map"] == 0.0


def _coco_scene(rng, images: int = 12, classes: int = 4):
    """Random ground truth and noisy detections (missed, displaced, wrong-class and
    tied-score ones), as dlbench's lists and as COCO's json."""
    dets, truths, imgs, anns, res = [], [], [], [], []
    for i in range(images):
        m, n = int(rng.integers(0, 6)), int(rng.integers(0, 15))
        xy, wh = rng.uniform(0, 200, (m, 2)), rng.uniform(5, 80, (m, 2))
        gb, gc = np.concatenate([xy, xy + wh], 1), rng.integers(1, classes + 1, m)
        pick = rng.integers(0, max(m, 1), n)
        db = (gb[pick] if m else rng.uniform(0, 200, (n, 4))) + rng.normal(0, 6, (n, 4))
        db[:, 2:] = np.maximum(db[:, 2:], db[:, :2] + 1)
        dc = np.where(rng.random(n) < 0.8, gc[pick] if m else 1, rng.integers(1, classes + 1, n))
        ds = np.round(rng.random(n), 2)
        dets.append((db, ds, dc))
        truths.append((gb, gc))
        imgs.append({"id": i + 1, "width": 300, "height": 300})
        xywh = lambda b: [b[0], b[1], b[2] - b[0], b[3] - b[1]]  # noqa: E731 - a one-line helper used right here
        anns += [
            {
                "id": len(anns) + j + 1,
                "image_id": i + 1,
                "category_id": int(c),
                "iscrowd": 0,
                "bbox": xywh(b),
                "area": float((b[2] - b[0]) * (b[3] - b[1])),
            }
            for j, (b, c) in enumerate(zip(gb, gc))
        ]
        res += [
            {"image_id": i + 1, "category_id": int(c), "score": float(s), "bbox": xywh(b)}
            for b, s, c in zip(db, ds, dc)
        ]
    cats = [{"id": k} for k in range(1, classes + 1)]
    return dets, truths, {"images": imgs, "annotations": anns, "categories": cats}, res


def test_average_precision_is_cocoevals():
    """AP@[.5:.95] and AP50 equal pycocotools' COCOeval (the reference) on random scenes."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from dlbench.harness.evaluate.average_precision import average_precision, summary

    rng = np.random.default_rng(1)
    for _ in range(8):
        dets, truths, dataset, res = _coco_scene(rng)
        with contextlib.redirect_stdout(io.StringIO()):
            gt = COCO()
            gt.dataset = dataset
            gt.createIndex()
            ev = COCOeval(gt, gt.loadRes(res), "bbox")
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
        mine = summary(average_precision(dets, truths))
        assert mine["map"] == pytest.approx(ev.stats[0], abs=1e-9)
        assert mine["map50"] == pytest.approx(ev.stats[1], abs=1e-9)
    assert summary(average_precision([], [])) == {"map": None, "map50": None}


def write_voc(root, n_train: int = 3, n_test: int = 2) -> dict:
    """A VOC2007-style tree: JPEGs with one red box each, XML annotations, splits."""
    from PIL import Image

    for d in ("Annotations", "JPEGImages", "ImageSets/Main"):
        (root / d).mkdir(parents=True, exist_ok=True)
    ids = {"trainval": [f"00{i:04d}" for i in range(n_train)], "test": [f"01{i:04d}" for i in range(n_test)]}
    for split, names in ids.items():
        (root / "ImageSets" / "Main" / f"{split}.txt").write_text("\n".join(names) + "\n")
        for k, name in enumerate(names):
            img = Image.new("RGB", (200, 100), (40, 40, 40))
            img.paste((255, 0, 0), (20, 10, 120, 90))  # x 21..120, y 11..90 (1-based)
            img.save(root / "JPEGImages" / f"{name}.jpg", quality=95)
            (root / "Annotations" / f"{name}.xml").write_text(f"""<annotation>
  <filename>{name}.jpg</filename><size><width>200</width><height>100</height><depth>3</depth></size>
  <object><name>{"car" if k % 2 else "dog"}</name><difficult>0</difficult>
    <bndbox><xmin>21</xmin><ymin>11</ymin><xmax>120</xmax><ymax>90</ymax></bndbox></object>
  <object><name>person</name><difficult>1</difficult>
    <bndbox><xmin>1</xmin><ymin>1</ymin><xmax>10</xmax><ymax>10</ymax></bndbox></object>
</annotation>""")
    return ids


def test_voc_reader_reads_boxes_images_and_splits(tmp_path):
    from dlbench.harness.data import open_dataset, parse
    from dlbench.harness.data.voc import parse_annotation

    root = tmp_path / "VOC2007"
    write_voc(root)
    assert parse(str(root))[0] == "voc"
    boxes, labels = parse_annotation(root / "Annotations" / "000000.xml", "t")
    np.testing.assert_allclose(boxes, [[0.1, 0.1, 0.6, 0.9]], atol=1e-6)
    assert labels.tolist() == [12]  # dog; the difficult person left out
    ds = open_dataset(str(root), MINI)
    ds.prepare()
    assert ds.split_sizes() == {"trainval": 3, "test": 2} and ds.eval_split == "test"
    x, (cls, loc) = next(ds.train_batches(2, 0, "NHWC"))
    assert x.shape == (2, 268, 268, 3) and cls.shape == (2, 7034) and loc.shape == (2, 7034, 4)
    ((x, (cls, loc)),) = list(ds.eval_batches(2, "NCHW"))
    assert x.shape == (2, 3, 268, 268)
    assert sorted(np.unique(cls[0]).tolist()) == [0, 12] and 7 in cls[1]  # dog, car
    pri = B.priors(MINI.config)
    np.testing.assert_allclose(
        B.decode(loc[0][cls[0] > 0], pri[cls[0] > 0]),
        np.broadcast_to([0.1, 0.1, 0.6, 0.9], (int((cls[0] > 0).sum()), 4)),
        atol=1e-5,
    )
    red = x[0, :, 140, 100] * np.array([0.229, 0.224, 0.225]) + [0.485, 0.456, 0.406]
    np.testing.assert_allclose(red, [1, 0, 0], atol=0.05)  # inside the box: red


def test_voc_reader_refuses_a_classifier(tmp_path):
    from dlbench.core.errors import UserError
    from dlbench.harness.data import open_dataset

    write_voc(tmp_path / "voc")
    with pytest.raises(UserError, match="detection data"):
        open_dataset(f"voc:{tmp_path / 'voc'}", get_model("vgg16-mini"))


def write_coco(root) -> None:
    """annotations/instances_{train,val}2017.json + train2017/, val2017/ JPEGs; two
    categories with COCO's sparse ids (3: car, 18: dog) and one crowd region."""
    import json

    from PIL import Image

    cats = [{"id": 18, "name": "dog"}, {"id": 3, "name": "car"}]
    (root / "annotations").mkdir(parents=True)
    for split, n in (("train2017", 2), ("val2017", 1)):
        (root / split).mkdir()
        images, anns = [], []
        for i in range(n):
            img = Image.new("RGB", (200, 100), (40, 40, 40))
            img.paste((0, 0, 255), (20, 10, 120, 90))
            img.save(root / split / f"{i:012d}.jpg", quality=95)
            images.append({"id": i + 1, "file_name": f"{i:012d}.jpg", "width": 200, "height": 100})
            anns.append(
                {
                    "id": 2 * i + 1,
                    "image_id": i + 1,
                    "category_id": 18,
                    "bbox": [20, 10, 100, 80],
                    "iscrowd": 0,
                }
            )
            anns.append(
                {"id": 2 * i + 2, "image_id": i + 1, "category_id": 3, "bbox": [0, 0, 10, 10], "iscrowd": 1}
            )
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({"images": images, "annotations": anns, "categories": cats})
        )


def test_coco_reader_renumbers_categories_and_leaves_crowds_out(tmp_path):
    from dlbench.harness.data import open_dataset, parse

    write_coco(tmp_path / "coco")
    assert parse(str(tmp_path / "coco"))[0] == "coco"
    ds = open_dataset(str(tmp_path / "coco"), MINI)
    ds.prepare()
    assert ds.split_sizes() == {"train2017": 2, "val2017": 1} and ds.eval_split == "val2017"
    _, boxes, labels = ds.items["train"][0]
    assert labels.tolist() == [2]  # dog: id 18, second by id after car (3)
    np.testing.assert_allclose(boxes, [[0.1, 0.1, 0.6, 0.9]], atol=1e-6)
    ((x, (cls, _)),) = list(ds.eval_batches(4, "NCHW"))
    assert x.shape == (1, 3, 268, 268) and sorted(np.unique(cls).tolist()) == [0, 2]


# --- every framework: the heads' layout and the loss ----------------------------------------


def _counting_heads(framework: str, x: np.ndarray):
    """ssd300-mini and its output on ``x`` (NCHW) with zero head kernels and counting
    biases (conv7_loc's from 1000): each output reads back which head channel it came from."""
    net = MINI.build(framework, seed=0)
    heads = list(ssd.heads(MINI.config))
    bias = {
        name: np.arange(cout, dtype=np.float32) + (1000 if name == "conv7_loc" else 0)
        for name, _, cout, _ in heads
    }
    if framework == "pytorch":
        import torch

        net.eval()
        with torch.no_grad():
            for name, _, _, _ in heads:
                head = getattr(net, name)
                head.weight.zero_()
                head.bias.copy_(torch.from_numpy(bias[name]))
            return net, net(torch.from_numpy(x))[0].numpy()
    if framework == "tensorflow":
        for name, _, _, _ in heads:
            layer = net.get_layer(name)
            kernel, _ = layer.get_weights()
            layer.set_weights([np.zeros_like(kernel), bias[name]])
        return net, np.asarray(net(x.transpose(0, 2, 3, 1)))[0]
    import mindspore as ms

    net.set_train(False)
    for name, _, _, _ in heads:
        head = getattr(net, name)
        head.weight.set_data(ms.Tensor(np.zeros(head.weight.shape, np.float32)))
        head.bias.set_data(ms.Tensor(bias[name]))
    return net, net(ms.Tensor(x)).asnumpy()[0]


@pytest.mark.parametrize("framework", frameworks())
def test_heads_flatten_row_column_box_then_coordinate(framework):
    """prior index (row * W + column) * boxes + box, channel box * 4 + coordinate."""
    x = np.random.default_rng(0).standard_normal((1, 3, 268, 268)).astype(np.float32)
    net, y = _counting_heads(framework, x)
    n1 = 34 * 34 * 4
    np.testing.assert_array_equal(y[:n1, :4], np.tile(np.arange(16).reshape(4, 4), (34 * 34, 1)))
    np.testing.assert_array_equal(y[n1 : n1 + 6, :4], 1000 + np.arange(24).reshape(6, 4))
    np.testing.assert_array_equal(y[:4, 4:], np.arange(84).reshape(4, 21))
    if framework == "mindspore":
        # conv3_3's 67x67 map pools to 34 (ceil), as PyTorch's ceil_mode does: a pad here
        assert net.pool3.pad.paddings == ((0, 0), (0, 0), (0, 1), (0, 1))


def _detection_loss(framework: str, z: np.ndarray, cls: np.ndarray, loc: np.ndarray):
    """(the framework's loss, which priors' class logits get a gradient) on logits ``z``;
    MindSpore's loss runs in graph mode, as training compiles it, and has no gradient here."""
    if framework == "pytorch":
        import torch

        from dlbench.models.ssd.torch import detection_loss

        zt = torch.from_numpy(z).requires_grad_()
        loss = detection_loss(zt, (torch.from_numpy(cls), torch.from_numpy(loc)))
        loss.backward()
        return float(loss.detach()), (zt.grad[..., 4:].abs().sum(-1) > 0).numpy()
    if framework == "tensorflow":
        import tensorflow as tf

        from dlbench.models.ssd.keras import detection_loss

        zv = tf.Variable(z)
        with tf.GradientTape() as tape:
            loss = detection_loss(zv, (tf.constant(cls), tf.constant(loc)))
        return float(loss), np.abs(tape.gradient(loss, zv).numpy()[..., 4:]).sum(-1) > 0
    import mindspore as ms

    from dlbench.models.ssd.mindspore import DetectionLoss

    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        return float(DetectionLoss()(ms.Tensor(z), ms.Tensor(cls), ms.Tensor(loc)).asnumpy()), None
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.mark.parametrize("framework", frameworks())
def test_loss_is_the_numpy_reference_with_hard_negatives(framework):
    ((_, (cls, loc)),) = synthetic.batches(MINI, 3, 1, seed=0)
    cls[2], loc[2] = 0, 0  # an image with no object
    z = np.random.default_rng(0).standard_normal(cls.shape + (25,)).astype(np.float32)
    loss, used = _detection_loss(framework, z, cls, loc)
    total, pos = B.multibox_loss(z, cls, loc)
    assert loss == pytest.approx(total / pos, rel=1e-5)
    if used is not None:
        npos = (cls > 0).sum(1)
        assert used.sum(1).tolist() == [4 * npos[0], 4 * npos[1], 0]  # 3 negatives each


# --- PyTorch: the walk against the running network, learning --------------------------------


@pytest.mark.pytorch
def test_walk_lists_every_conv_in_network_order_with_its_output_size():
    import torch
    from torch import nn

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


@pytest.mark.pytorch
def test_loss_falls_on_synthetic_scenes():
    import torch

    from dlbench.models.ssd.torch import detection_loss

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


# --- Keras: the padding spelled out per layer -----------------------------------------------


@pytest.mark.tensorflow
def test_every_conv_has_the_walks_output_size():
    net = MINI.build("tensorflow", seed=0)
    for name, _, cout, _, _, _, _, hw in ssd.backbone(MINI.config):
        assert tuple(net.get_layer(name).output.shape[1:]) == (hw, hw, cout), name
    assert net.get_layer("conv6").dilation_rate == (6, 6)
    assert net.output.shape[1:] == (7034, 25)
