"""Hand-written ONNX Runtime inference loop: the yardstick for ``dlbench bench``'s overhead.

Nothing from the harness: an ``InferenceSession`` with the session options
``dlbench bench`` sets for the CPU provider (intra-op threads, inter-op
threads and sequential execution, graph optimization level "all", ORT's
default intra-op spinning), one batch of standard-normal float32 inputs made
with the same generator call and seed, a warm-up, then ``--iterations``
timed ``session.run(None, feeds)`` calls.  Throughput is samples over the
window's wall time, as the harness computes it.  Prints one JSON line.

On a GPU (``--device cuda``, onnxruntime-gpu) the session gets the CUDA
provider with ``use_tf32`` "0" (IEEE float32, as dlbench sets it) and CPU
fallback refused; with ``--io-binding on`` (dlbench's GPU default) the input
is an OrtValue already on the device, the output is bound on the device, and a
timed call is ``run_with_iobinding`` then ``synchronize_outputs``; with
``--io-binding off`` it is ``session.run(None, feeds)`` from host memory.
``--batch-sizes`` times several batches in one process, one JSON line each.

    python benchmarks/plain_bench_onnxruntime.py resnet50.onnx --batch-size 32 --threads 2
    python benchmarks/plain_bench_onnxruntime.py resnet50.onnx --device cuda --batch-sizes 1,32
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
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--io-binding", default="on", choices=("on", "off"), help="GPU only")
    p.add_argument("--batch-sizes", default=None, help="comma list; overrides --batch-size")
    a = p.parse_args(argv)

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = a.inter_op_threads
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    so.log_severity_level = 3
    providers: list = ["CPUExecutionProvider"]
    if a.device == "cuda":
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        providers = [("CUDAExecutionProvider", {"device_id": 0, "use_tf32": "0"})]
    sess = ort.InferenceSession(a.model, sess_options=so, providers=providers)
    assert sess.get_providers()[0] == (
        "CUDAExecutionProvider" if a.device == "cuda" else "CPUExecutionProvider"
    )
    [inp] = sess.get_inputs()
    sizes = [int(b) for b in a.batch_sizes.split(",")] if a.batch_sizes else [a.batch_size]
    for batch in sizes:
        shape = [batch] + [int(d) for d in inp.shape[1:]]
        feeds = {inp.name: np.random.default_rng(a.seed).standard_normal(shape, dtype=np.float32)}
        if a.device == "cuda" and a.io_binding == "on":
            binding = sess.io_binding()
            value = ort.OrtValue.ortvalue_from_numpy(feeds[inp.name], "cuda", 0)
            binding.bind_ortvalue_input(inp.name, value)
            for out in sess.get_outputs():
                binding.bind_output(out.name, "cuda", 0)
            binding.synchronize_inputs()

            def step(binding=binding):
                sess.run_with_iobinding(binding)
                binding.synchronize_outputs()

        else:

            def step(feeds=feeds):
                sess.run(None, feeds)

        result = timed(step, batch, a.warmup, a.iterations)
        print(json.dumps({**result, "batch_size": batch, "onnxruntime": ort.__version__}), flush=True)


if __name__ == "__main__":
    main()
