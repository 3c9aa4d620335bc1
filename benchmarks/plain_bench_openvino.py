"""Hand-written OpenVINO inference loop: the yardstick for ``dlbench bench -b openvino``.

Nothing from the harness: ``Core.read_model`` and ``compile_model`` on the
CPU plugin with the properties ``dlbench bench`` sets by default
(``INFERENCE_PRECISION_HINT=f32``, ``INFERENCE_NUM_THREADS`` = the threads,
``NUM_STREAMS=1``, ``PERFORMANCE_HINT=LATENCY``, ``ENABLE_CPU_PINNING``), the
symbolic batch fixed to the batch size as the harness does for a one-batch
cell, one batch of standard-normal float32 inputs made with the same
generator call and seed, set on one infer request once, then ``--iterations``
timed ``request.infer()`` calls.  Throughput is samples over the window's
wall time, as the harness computes it.  Prints one JSON line.

    python benchmarks/plain_bench_openvino.py resnet50.onnx --batch-size 8 --threads 2
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import openvino as ov

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_loop import parser, timed


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--precision-hint", default="f32", help="INFERENCE_PRECISION_HINT")
    a = p.parse_args(argv)

    core = ov.Core()
    model = core.read_model(a.model)
    [inp] = model.inputs
    shape = [a.batch_size] + [d.get_length() for d in list(inp.get_partial_shape())[1:]]
    model.reshape({inp.get_any_name(): ov.PartialShape(shape)})
    compiled = core.compile_model(
        model,
        "CPU",
        {
            "INFERENCE_PRECISION_HINT": a.precision_hint,
            "INFERENCE_NUM_THREADS": a.threads,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "ENABLE_CPU_PINNING": True,
        },
    )
    request = compiled.create_infer_request()
    x = np.random.default_rng(a.seed).standard_normal(shape, dtype=np.float32)
    request.set_input_tensor(ov.Tensor(x, shared_memory=True))

    result = timed(request.infer, a.batch_size, a.warmup, a.iterations)
    print(
        json.dumps(
            {
                **result,
                "openvino": ov.__version__,
                "precision": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
            }
        )
    )


if __name__ == "__main__":
    main()
