"""Hand-written MindSpore training loop: the yardstick for the harness's overhead.

It shares only the model builder and the synthetic data with the harness (no
``Session``, no ``harness.training.loop``), so if the harness's throughput
drifts from this one's, the difference is the harness's own cost.  The loop
is MindSpore's idiomatic one: GRAPH_MODE, WithLossCell + TrainOneStepCell.

    python benchmarks/plain_train_mindspore.py --model resnet50 --batch-size 16 \
        --steps 3 --warmup-steps 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("GLOG_v", "3")  # MindSpore's INFO/WARNING logs, read at import
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mindspore as ms
from mindspore import nn

from dlbench.models import synthetic
from dlbench.models.registry import get_model


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU kernel threads (intra-op); dispatch (inter-op) threads stay 1, as the harness's default",
    )
    p.add_argument("--inter-op-threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup_steps < 0:
        p.error("--steps must be >= 1 and --warmup-steps >= 0")

    ms.set_device("CPU")
    ms.device_context.cpu.op_tuning.threads_num(args.threads)
    ms.runtime.dispatch_threads_num(args.inter_op_threads)
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(args.seed)

    spec = get_model(args.model)
    total = args.warmup_steps + args.steps
    n = synthetic.pool_size(spec, args.batch_size, total)
    data = [
        (ms.Tensor(x), ms.Tensor(y))
        for x, y in synthetic.image_batches(spec, args.batch_size, n, seed=args.seed)
    ]

    net = spec.build("mindspore")
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=args.lr, momentum=args.momentum)
    train = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train.set_train()

    for i in range(total):
        if i == args.warmup_steps:
            start = time.perf_counter()
        x, y = data[i % n]
        train(x, y).asnumpy()
    window = time.perf_counter() - start
    print(
        json.dumps(
            {"throughput_sps": args.steps * args.batch_size / window, "window_s": window, "steps": args.steps}
        )
    )


if __name__ == "__main__":
    main()
