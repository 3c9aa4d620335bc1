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

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_loop import parser, timed


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("model")
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

    result = timed(lambda: sess.run(None, feeds), a.batch_size, a.warmup, a.iterations)
    print(json.dumps({**result, "onnxruntime": ort.__version__}))


if __name__ == "__main__":
    main()
