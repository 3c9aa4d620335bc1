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

    python benchmarks/plain_bench_pytorch.py --model resnet50 --batch-size 32 --threads 2
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
    shape = (a.batch_size, *spec.inputs[0].shape)
    x = torch.from_numpy(np.random.default_rng(a.seed).standard_normal(shape, dtype=np.float32))

    with torch.inference_mode():
        result = timed(lambda: model(x), a.batch_size, a.warmup, a.iterations)
    print(json.dumps({**result, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
