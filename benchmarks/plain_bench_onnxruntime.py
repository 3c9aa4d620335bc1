"""Hand-written ONNX Runtime inference loop: the yardstick for ``dlbench bench``'s overhead.

Nothing from the harness: an ``InferenceSession`` with the session options
``dlbench bench`` sets for the CPU provider (intra-op threads, inter-op
threads and sequential execution, graph optimization level "all", ORT's
default intra-op spinning), one batch of standard-normal float32 inputs made
with the same generator call and seed, a warm-up, then ``--iterations``
timed ``session.run(None, feeds)`` calls.  Throughput is samples over the
window's wall time, as the harness computes it.  Prints one JSON line.

    python benchmarks/plain_bench_onnxruntime.py resnet50.onnx --batch-size 32 --threads 2
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import onnxruntime as ort


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--inter-op-threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = a.inter_op_threads
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    so.log_severity_level = 3
    sess = ort.InferenceSession(a.model, sess_options=so, providers=["CPUExecutionProvider"])
    [inp] = sess.get_inputs()
    shape = [a.batch_size] + [int(d) for d in inp.shape[1:]]
    feeds = {inp.name: np.random.default_rng(a.seed).standard_normal(shape, dtype=np.float32)}

    for _ in range(1 + a.warmup):                 # the first run, then the warm-up
        sess.run(None, feeds)
    times = []
    start = time.perf_counter()
    for _ in range(a.iterations):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    window = time.perf_counter() - start
    print(json.dumps({"throughput_sps": a.iterations * a.batch_size / window, "window_s": window,
                      "median_ms": float(np.median(times)) * 1000,
                      "onnxruntime": ort.__version__}))


if __name__ == "__main__":
    main()
