"""What the detectors' graphs leave out: post-processing outside the graph, timed.

dlbench's SSD and Mask R-CNN graphs are the raw heads (``models/ssd``,
``models/maskrcnn``): decoding, NMS and mask pasting run in numpy, outside, so that
every hop is verified on continuous outputs.  ``dlbench bench`` therefore times the
network alone.  This script times the rest on ONNX Runtime, for the exported files:

* SSD: the graph at batch B, then ``boxes.detect`` (decode, softmax, per-class NMS);
* Mask R-CNN: the graph is the heads on GIVEN boxes, so one image's whole inference
  is three runs around the numpy steps: run 1 (any boxes) -> ``proposals`` from its RPN
  part; run 2 (rois = proposals) -> ``detections`` from its box part; run 3
  (mask_rois = detections) -> ``paste_masks``.  Three backbone passes where a fused
  two-stage graph makes one: the price of a graph without selections, stated here
  with its size.

    .venv/bin/python benchmarks/detection_postprocess.py ssd300-mini=runs/ssd300-mini/pytorch/model.onnx \\
        maskrcnn-mini=runs/maskrcnn-mini/pytorch/model.onnx --batch 4 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time


def _median_s(fn, repeats: int) -> float:
    fn()  # warm-up, not timed
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _session(path: str, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess, [i.name for i in sess.get_inputs()]


def ssd(spec, path: str, batch: int, threads: int, repeats: int) -> dict:
    from dlbench.models import synthetic
    from dlbench.models.ssd import boxes

    sess, names = _session(path, threads)
    x = synthetic.sample_inputs(spec, batch)
    feed = dict(zip(names, x))
    logits = sess.run(None, feed)[0]
    graph = _median_s(lambda: sess.run(None, feed), repeats)
    post = _median_s(lambda: boxes.detect(logits, spec.config), repeats)
    return {"graph_ms": 1e3 * graph, "post_ms": 1e3 * post, "end_to_end_ms": 1e3 * (graph + post)}


def maskrcnn(spec, path: str, batch: int, threads: int, repeats: int) -> dict:
    from dlbench.models import synthetic
    from dlbench.models.maskrcnn import inference as inf

    cfg = spec.config
    sess, names = _session(path, threads)
    image, rois, mask_rois = synthetic.sample_inputs(spec, batch)

    def run(r, m):
        return sess.run(None, dict(zip(names, (image, r, m))))[0]

    def whole():
        first = run(rois, mask_rois)
        props, _ = inf.proposals(inf.rpn_outputs(cfg, first), cfg, cfg["rois"])
        second = run(props, mask_rois)
        box = inf.M.split_output(cfg, second)["box"]
        dets, _, classes = inf.detections(box, props, cfg, cfg["mask_rois"])
        third = run(props, dets)
        masks = inf.M.split_output(cfg, third)["mask"]
        return [inf.paste_masks(masks[i], dets[i], classes[i], cfg["image_size"]) for i in range(batch)]

    first = run(rois, mask_rois)
    rpn = inf.rpn_outputs(cfg, first)
    props, _ = inf.proposals(rpn, cfg, cfg["rois"])
    box = inf.M.split_output(cfg, run(props, mask_rois))["box"]
    dets, _, classes = inf.detections(box, props, cfg, cfg["mask_rois"])
    masks = inf.M.split_output(cfg, run(props, dets))["mask"]
    graph = _median_s(lambda: run(rois, mask_rois), repeats)
    steps = {
        "proposals_ms": _median_s(lambda: inf.proposals(rpn, cfg, cfg["rois"]), repeats),
        "detections_ms": _median_s(lambda: inf.detections(box, props, cfg, cfg["mask_rois"]), repeats),
        "paste_ms": _median_s(
            lambda: [inf.paste_masks(masks[i], dets[i], classes[i], cfg["image_size"]) for i in range(batch)],
            repeats,
        ),
    }
    return {
        "graph_ms": 1e3 * graph,
        **{k: 1e3 * v for k, v in steps.items()},
        "end_to_end_ms": 1e3 * _median_s(whole, repeats),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", metavar="MODEL=FILE.onnx")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    from dlbench.models.registry import get_model

    print("| model | batch | graph alone (ms) | outside the graph (ms) | end to end (ms) |")
    print("| --- | --- | --- | --- | --- |")
    for item in args.files:
        name, _, path = item.partition("=")
        spec = get_model(name)
        run = maskrcnn if spec.family == "maskrcnn" else ssd
        r = run(spec, path, args.batch, args.threads, args.repeats)
        post = {k: v for k, v in r.items() if k not in ("graph_ms", "end_to_end_ms")}
        print(
            f"| {name} | {args.batch} | {r['graph_ms']:.1f} | "
            + ", ".join(f"{k[:-3]} {v:.1f}" for k, v in post.items())
            + f" | {r['end_to_end_ms']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
