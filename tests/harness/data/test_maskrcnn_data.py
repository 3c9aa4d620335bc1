"""Mask R-CNN's data outside the synthetic generator: valid boxes on the verify,
export, INT8 calibration and bench input paths (zoo spec and an ONNX file dlbench
exported), the COCO reader's masks (small files written here in COCO's format) and
the eval table.  Core group: no framework imported."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.models.maskrcnn import boxes as B
from dlbench.models.maskrcnn import reference
from dlbench.models.registry import get_model

MINI = get_model("maskrcnn-mini")
CFG = MINI.config


def _valid_boxes(b: np.ndarray, size: int = 128) -> bool:
    return bool((b >= 0).all() and (b <= size).all() and (b[..., 2:] > b[..., :2]).all())


def test_verify_and_bench_inputs_are_valid_boxes(tmp_path):
    from dlbench.harness.bench import artifacts
    from dlbench.harness.bench import inputs as planner
    from dlbench.harness.verify import inputs as vin

    for batch in vin.inputs_for_model("maskrcnn-mini", (1, 3)):
        image, rois, mask_rois = batch
        assert image.shape[1:] == (3, 128, 128) and _valid_boxes(rois) and _valid_boxes(mask_rois)
    art = artifacts.resolve("maskrcnn-mini")
    assert art.graph_ranges == {"rois": (0, 128), "mask_rois": (0, 128)}
    p = planner.plan(art.signature, 2, {}, {}, art.graph_ranges, {})
    assert [i.fill for i in p.inputs] == ["normal", "boxes", "boxes"]
    feeds = planner.synthesize(p, 7)
    assert _valid_boxes(feeds["rois"]) and feeds["mask_rois"].shape == (2, 8, 4)
    assert np.array_equal(feeds["rois"], planner.synthesize(p, 7)["rois"])
    sides = np.sqrt(B.area(feeds["rois"].reshape(-1, 4).astype(np.float64)))
    assert len(np.unique(reference.roi_levels(feeds["rois"], CFG))) >= 3 and sides.max() <= 64

    # An ONNX file dlbench exported (its metadata names the model): verification,
    # calibration and bench all give boxes.
    import onnx
    from onnx import TensorProto, helper

    from dlbench.converters import onnx_io
    from dlbench.converters.onnx_summary import summarize

    ins = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", *s])
        for n, s in (("image", (3, 128, 128)), ("rois", (32, 4)), ("mask_rois", (8, 4)))
    ]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 32, 4])
    graph = helper.make_graph([helper.make_node("Identity", ["rois"], ["logits"])], "g", ins, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_io.set_metadata(model, {"model": "maskrcnn-mini"})
    path = tmp_path / "maskrcnn.onnx"
    onnx.save(model, path)
    summary = summarize(onnx.load(path))
    for batch in vin.inputs_for_onnx(summary, (2,)) + vin.calibration_stream(summary, 2, 2):
        assert len(batch) == 3 and _valid_boxes(batch[1]) and _valid_boxes(batch[2])
    art = artifacts.resolve(str(path))
    assert art.graph_ranges["rois"] == (0, 128)
    p = planner.plan(art.signature, 2, {}, {}, art.graph_ranges, {})
    assert _valid_boxes(planner.synthesize(p, 0)["mask_rois"])


# --- COCO ---------------------------------------------------------------------------------


def write_coco(root, segmentation=None) -> None:
    """annotations/instances_{train,val}2017.json + 200 x 100 JPEGs: a blue rectangle
    (category 18) given as a polygon, a red triangle (category 3) as a polygon in two
    parts, and a crowd region."""
    from PIL import Image, ImageDraw

    cats = [{"id": 18, "name": "dog"}, {"id": 3, "name": "car"}]
    (root / "annotations").mkdir(parents=True)
    for split, n in (("train2017", 4), ("val2017", 2)):
        (root / split).mkdir()
        images, anns = [], []
        for i in range(n):
            img = Image.new("RGB", (200, 100), (40, 40, 40))
            draw = ImageDraw.Draw(img)
            draw.rectangle((20, 10, 119, 89), fill=(0, 0, 255))
            draw.polygon([(130, 20), (190, 20), (190, 80)], fill=(255, 0, 0))
            img.save(root / split / f"{i:012d}.jpg", quality=95)
            images.append({"id": i + 1, "file_name": f"{i:012d}.jpg", "width": 200, "height": 100})
            rect = [[20, 10, 120, 10, 120, 90, 20, 90]]
            anns.append(
                {
                    "id": 3 * i + 1,
                    "image_id": i + 1,
                    "category_id": 18,
                    "bbox": [20, 10, 100, 80],
                    "iscrowd": 0,
                    "segmentation": segmentation or rect,
                }
            )
            anns.append(
                {
                    "id": 3 * i + 2,
                    "image_id": i + 1,
                    "category_id": 3,
                    "bbox": [130, 20, 60, 60],
                    "iscrowd": 0,
                    "segmentation": [[130, 20, 160, 20, 160, 50], [160, 20, 190, 20, 190, 80, 160, 50]],
                }
            )
            anns.append(
                {
                    "id": 3 * i + 3,
                    "image_id": i + 1,
                    "category_id": 3,
                    "bbox": [0, 0, 10, 10],
                    "iscrowd": 1,
                    "segmentation": {"counts": "crowd", "size": [100, 200]},
                }
            )
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({"images": images, "annotations": anns, "categories": cats})
        )


def test_polygons_and_rle_rasterize_at_pixel_centres():
    from dlbench.harness.data import segmentation as S

    rect = S.instance_mask([[20, 10, 120, 10, 120, 90, 20, 90]], 200, 100, 128)
    want = np.zeros((128, 128))
    want[13:115, 13:77] = 1  # x 12.8..76.8, y 12.8..115.2
    np.testing.assert_array_equal(rect, want)
    tri = S.polygon_mask(np.array([[0, 0], [100, 0], [100, 100.0]]), 100, 100)
    assert tri.sum() == pytest.approx(5000, abs=60) and tri[10, 90] and not tri[90, 10]
    np.testing.assert_array_equal(S.rle_mask([1, 2, 3], 2, 3), [[0, 1, 0], [1, 0, 0]])
    rle = {"counts": [2 * 100 + 10, 80, 20, 80, 0], "size": [100, 200]}
    rle["counts"][-1] = 200 * 100 - sum(rle["counts"])  # columns 2 and 3, rows 10..89
    m = S.instance_mask(rle, 200, 100, 100)  # half as wide: column 1
    assert m.sum() == 80 and m[10:90, 1].all()
    assert S.problem([[1, 2, 3]]) and S.problem(None) and S.problem(rle) is None


def test_compressed_rle_decodes_as_pycocotools_encodes_it():
    """COCO's string RLE, checked against the reference encoder on random masks (long
    runs, negative differences, empty and full masks), and broken strings refused."""
    from pycocotools import mask as coco_mask

    from dlbench.harness.data import segmentation as S

    rng = np.random.default_rng(0)
    for i in range(200):
        h, w = (int(v) for v in rng.integers(1, 300, 2))
        m = rng.random((h, w)) < rng.random()
        if i % 7 == 0:
            m[:] = i % 2  # one run, or a zero run first
        enc = coco_mask.encode(np.asfortranarray(m.astype(np.uint8)))
        seg = {"counts": enc["counts"].decode(), "size": enc["size"]}
        assert S.problem(seg) is None
        np.testing.assert_array_equal(S.rle_mask(S.rle_counts(seg["counts"]), h, w), m)
    assert S.rle_counts("01:2H000004")[:3] == [0, 1, 10]
    assert S.problem({"counts": "0\x7f", "size": [1, 1]}).startswith("compressed RLE that does not decode")
    assert S.problem({"counts": "0e", "size": [1, 1]}).endswith("it ends inside a run)")
    assert S.problem({"counts": "05", "size": [2, 2]}) == (
        "compressed RLE whose runs do not add up to its size"
    )
    assert S.problem({"counts": None, "size": [2, 2]}).startswith("RLE 'counts' must be")
    assert S.problem({"counts": [1, "x"], "size": [2, 2]}).startswith("RLE whose counts")
    assert S.problem({"counts": [4], "size": [2]}).startswith("RLE whose counts")


def test_coco_reader_gives_mask_rcnn_batches(tmp_path):
    from dlbench.harness.data import open_dataset, parse
    from dlbench.harness.data import segmentation as S

    write_coco(tmp_path / "coco")
    assert parse(str(tmp_path / "coco"))[0] == "coco"
    ds = open_dataset(str(tmp_path / "coco"), MINI)
    ds.prepare()
    assert ds.split_sizes() == {"train2017": 4, "val2017": 2}
    _, boxes, labels, (segs, w, h) = ds.items["train"][0]
    assert labels.tolist() == [2, 1] and len(segs) == 2 and (w, h) == (200, 100)
    (x, rois, mask_rois), y = next(ds.eval_batches(2, "NCHW"))
    assert x.shape == (2, 3, 128, 128) and rois.shape == (2, 32, 4) and len(y) == 6
    assert all(a.dtype == np.float32 for a in (x, rois, mask_rois, *y))
    assert sorted(np.unique(y[2]).tolist()) == [0, 1, 2] and (y[4] > 0).all()
    # Each mask target is its object's polygon read in the mask box.
    masks = [S.instance_mask(s, 200, 100, 128) for s in segs]
    gt = boxes.astype(np.float64) * 128
    for d in range(CFG["mask_rois"]):
        g = int(np.argmax(B.iou(mask_rois[0, d : d + 1].astype(np.float64), gt)[0]))
        assert [2, 1][g] == y[4][0, d]
        want = B.mask_targets(masks[g], mask_rois[0, d : d + 1], 28, 2)[0]
        np.testing.assert_array_equal(y[5][0, d], want)
    again = next(ds.eval_batches(2, "NCHW"))
    assert np.array_equal(again[0][1], rois) and np.array_equal(again[1][5], y[5])
    (xt, rt, mt), yt = next(ds.train_batches(2, 0, "NHWC"))
    assert xt.shape == (2, 128, 128, 3) and _valid_boxes(rt) and yt[5].shape == (2, 8, 28, 28)
    # The rectangle (dog: label 2) fills its mask boxes, and their centres are blue in
    # the image: boxes, masks and pixels flip together.
    blue = xt[..., 2] - xt[..., 0] > 2
    for i in range(2):
        own = yt[4][i] == 2
        assert own.any() and yt[5][i][own].mean() > 0.8 and (yt[2][i] > 0).sum() == 8
        for x0, y0, x1, y1 in mt[i][own]:
            assert blue[i, int((y0 + y1) / 2), int((x0 + x1) / 2)]


def test_coco_reader_reads_compressed_rle_and_refuses_classifiers(tmp_path):
    """The rectangle given as pycocotools' string RLE gives the masks its polygon gives;
    a string that does not decode names its annotation."""
    from pycocotools import mask as coco_mask

    from dlbench.harness.data import open_dataset

    full = np.zeros((100, 200), np.uint8)
    full[10:90, 20:120] = 1  # the polygon's pixel centres
    enc = coco_mask.encode(np.asfortranarray(full))
    write_coco(tmp_path / "poly")
    write_coco(tmp_path / "rle", segmentation={"counts": enc["counts"].decode(), "size": enc["size"]})
    poly, rle = (open_dataset(str(tmp_path / d), MINI) for d in ("poly", "rle"))
    poly.prepare()
    rle.prepare()
    (_, yp), (_, yr) = next(poly.eval_batches(2, "NCHW")), next(rle.eval_batches(2, "NCHW"))
    np.testing.assert_array_equal(yp[5], yr[5])
    write_coco(tmp_path / "bad", segmentation={"counts": "PQ", "size": [100, 200]})
    ds = open_dataset(str(tmp_path / "bad"), MINI)
    with pytest.raises(UserError, match="annotation 1 of 000000000000.jpg: compressed RLE"):
        ds.prepare()
    with pytest.raises(UserError, match="detection or instance-segmentation data"):
        open_dataset(str(tmp_path / "bad"), get_model("vgg16-mini"))


def test_eval_table_shows_a_missing_accuracy_as_a_dash():
    from dlbench.harness.evaluate.table import eval_table

    record = {
        "status": "ok",
        "model": "maskrcnn-mini",
        "backend": "onnxruntime",
        "context": {"artifact": {"label": "m.onnx"}},
        "metrics": {
            "eval": {"split": "synthetic-heldout", "samples": 4, "accuracy": None, "loss": 1.5, "time_s": 0.1}
        },
    }
    row = [c.strip() for c in eval_table([record]).splitlines()[-1].split("|")]
    assert row[-5:-1] == ["-", "1.5000", "", "0.10 s"]
    record["metrics"]["eval"].update(mask_iou=0.75, map=None)
    row = [c.strip() for c in eval_table([record]).splitlines()[-1].split("|")]
    assert row[-5:-1] == ["-", "1.5000", "mask IoU 0.750", "0.10 s"]
