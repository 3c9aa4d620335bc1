"""Hand-written PyTorch training loop: the yardstick for the harness's overhead.

It shares only the model builder and the synthetic data with the harness (no
``Session``, no ``harness.training.loop``), so if the harness's throughput
drifts from this one's, the difference is the harness's own cost.  On a GPU
(``--device gpu``) the batches are placed on the device before the clock,
float32 is IEEE unless ``--precision tf32``, and ``--precision amp`` runs the
forward under fp16 autocast with a GradScaler, as ``dlbench train`` does;
``loss.item()`` ends each step on both sides.

    python benchmarks/plain_train_pytorch.py --model resnet50 --batch-size 16 \
        --steps 3 --warmup-steps 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F

from dlbench.models import synthetic
from dlbench.models.registry import get_model


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument(
        "--threads", type=int, default=1, help="intra-op threads (inter-op is 1, dlbench's default)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "amp"))
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup_steps < 0:
        p.error("--steps must be >= 1 and --warmup-steps >= 0")

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)

    spec = get_model(args.model)
    total = args.warmup_steps + args.steps
    n = synthetic.pool_size(spec, args.batch_size, total)
    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    data = [
        (torch.from_numpy(x).to(device), torch.from_numpy(y).long().to(device))
        for x, y in synthetic.image_batches(spec, args.batch_size, n, seed=args.seed)
    ]

    model = spec.build("pytorch").to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    amp = args.precision == "amp"
    scaler = torch.amp.GradScaler("cuda") if amp and device.type == "cuda" else None
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16

    for i in range(total):
        if i == args.warmup_steps:
            start = time.perf_counter()
        x, y = data[i % n]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
            out = model(x)
        loss = F.cross_entropy(out, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        loss.item()
    window = time.perf_counter() - start
    print(
        json.dumps(
            {"throughput_sps": args.steps * args.batch_size / window, "window_s": window, "steps": args.steps}
        )
    )


if __name__ == "__main__":
    main()
