"""Hand-written PyTorch inference loop: the yardstick for ``dlbench bench -b pytorch``.

It shares only the zoo's model builder with the harness (no runner, no timed
loop): the network built with the seed, ``eval()``, intra-op threads set and
inter-op threads 1, one batch of standard-normal float32 inputs made with the
same generator call and seed, the first run and a warm-up, then
``--iterations`` timed ``model(x)`` calls under ``torch.inference_mode``.
Throughput is samples over the window's wall time, as the harness computes it.
Prints one JSON line.  The allocator is whatever the environment says: the
caller (benchmarks/allocator_table.py) gives it the dlbench cell's environment.

``--save-torchscript FILE`` traces the zoo network (its forward is not
scriptable), saves it as a user would (``torch.jit.save``) and prints its
input's name; ``--torchscript FILE`` then
times that archive (``torch.jit.load``) instead of the builder's module: the
yardstick for ``dlbench bench FILE -b pytorch`` on a user's own model.

On a GPU (``--device cuda``) it follows what ``dlbench bench --device cuda``
documents: weights and the input moved to the device (and cast for
``--precision fp16|bf16``) before timing, IEEE float32 unless ``--precision
tf32``, ``torch.cuda.synchronize()`` after each call, and optionally
``torch.compile`` (``--compile MODE``) or a CUDA graph captured after three
side-stream warm-up calls and replayed (``--cuda-graph``).  ``--batch-sizes``
times several batches in one process, one JSON line each.

    python benchmarks/plain_bench_pytorch.py --model resnet50 --batch-size 32 --threads 2
    python benchmarks/plain_bench_pytorch.py --device cuda --cuda-graph --batch-sizes 1,8,32
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import torch
from plain_loop import parser, timed

from dlbench.models.registry import get_model


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--torchscript", default=None, help="time this TorchScript archive")
    p.add_argument("--save-torchscript", default=None, help="trace the network, save, exit")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "fp16", "bf16"))
    p.add_argument("--compile", default=None, help="torch.compile mode (default: eager)")
    p.add_argument("--cuda-graph", action="store_true")
    p.add_argument("--batch-sizes", default=None, help="comma list; overrides --batch-size")
    a = p.parse_args(argv)

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(a.inter_op_threads)
    spec = get_model(a.model)
    if a.save_torchscript:
        example = torch.zeros((1, *spec.inputs[0].shape))
        with torch.no_grad():
            traced = torch.jit.trace(spec.build("pytorch", seed=a.seed).eval(), example)
        traced.save(a.save_torchscript)
        print(json.dumps({"input": traced.forward.schema.arguments[1].name}))
        return
    model = (torch.jit.load(a.torchscript) if a.torchscript else spec.build("pytorch", seed=a.seed)).eval()
    device = torch.device(a.device)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision, torch.float32)
    if device.type == "cuda":
        tf32 = a.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    model = model.to(device, dtype)
    if a.compile:
        # Static shapes, as dlbench's cells compile them (one fresh process per batch size):
        # without dynamic=False the second batch size would turn on automatic dynamic shapes.
        model = torch.compile(model, mode=None if a.compile == "default" else a.compile, dynamic=False)
    sizes = [int(b) for b in a.batch_sizes.split(",")] if a.batch_sizes else [a.batch_size]
    for batch in sizes:
        shape = (batch, *spec.inputs[0].shape)
        x = torch.from_numpy(np.random.default_rng(a.seed).standard_normal(shape, dtype=np.float32))
        x = x.to(device, dtype)
        with torch.inference_mode():
            step = _graph(torch, model, x) if a.cuda_graph else (lambda x=x: model(x))
            if device.type == "cuda":
                result = timed(
                    lambda step=step: (step(), torch.cuda.synchronize()), batch, a.warmup, a.iterations
                )
            else:
                result = timed(step, batch, a.warmup, a.iterations)
        print(json.dumps({**result, "batch_size": batch, "torch": torch.__version__}), flush=True)


def _graph(torch, model, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)
    return graph.replay


if __name__ == "__main__":
    main()
