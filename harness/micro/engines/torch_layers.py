"""PyTorch layers: ``torch.nn`` modules with the canonical weights imported
(``models.weights.pytorch``), forward under ``inference_mode`` as inference
runs, train as forward + backward of sum(output * cot) (input and weight
gradients), batch norm in training mode."""

from __future__ import annotations

from dlbench.harness.cells import mathmode
from dlbench.harness.micro import layers
from dlbench.harness.micro.engines import Kernel

FRAMEWORK = "torch"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"forward": ("fp32", "bf16"), "train": ("fp32", "bf16")}


def _layer(nn, op):
    d, k = op.dims, op.kernel
    return {
        "conv": lambda: nn.Conv2d(d[1], d[4], d[5], d[6], d[5] // 2),
        "dwconv": lambda: nn.Conv2d(d[1], d[1], d[4], d[5], d[4] // 2, groups=d[1]),
        "dense": lambda: nn.Linear(d[1], d[2]),
        "bn": lambda: nn.BatchNorm2d(d[1], eps=layers.EPS),
        "maxpool": lambda: nn.MaxPool2d(d[4], d[5], d[6]),
        "avgpool": lambda: nn.AvgPool2d(d[4], d[5]),
        "layernorm": lambda: nn.LayerNorm(d[-1], eps=layers.EPS),
        "embedding": lambda: nn.Embedding(d[2], d[3]),
        "lstm": lambda: nn.LSTM(d[2], d[3], batch_first=True),
        "mha": lambda: nn.MultiheadAttention(d[2], d[3], batch_first=True),
        "relu": nn.ReLU,
        "gelu": nn.GELU,
        "sigmoid": nn.Sigmoid,
        "tanh": nn.Tanh,
    }[k]()


def build(op, mode, precision, device, arrays, threads) -> Kernel:
    import torch
    from torch import nn

    from dlbench.models.weights.pytorch import import_weights

    torch.set_num_threads(threads)
    math = mathmode.torch_math(torch, device, precision)
    dev = torch.device(device)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = _layer(nn, op)

        def forward(self, x):
            out = self.layer(x, x, x, need_weights=False) if mha else self.layer(x)
            return out[0] if isinstance(out, tuple) else out  # LSTM, MHA: the sequence

    mha = op.kernel == "mha"
    net = Net()
    weights = layers.canonical(op, arrays)
    if mha:  # its arrays are nn.MultiheadAttention's own parameters, by name
        net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    else:
        import_weights(net, weights)
    net = net.to(dev, dtype)
    net.train(mode == "train")
    x = torch.from_numpy(arrays["x"]).to(dev)
    x = x if op.kernel == "embedding" else x.to(dtype)
    cot = torch.from_numpy(arrays["cot"]).to(dev, dtype)
    sync = (lambda: torch.cuda.synchronize(dev)) if device == "cuda" else (lambda: None)
    box = {}
    if mode == "forward":

        def step():
            with torch.inference_mode():
                box["out"] = net(x)
            sync()
    else:
        x.requires_grad_(op.kernel != "embedding")
        watched = x if op.kernel != "embedding" else net.layer.weight

        def step():
            for p in net.parameters():
                p.grad = None
            x.grad = None
            out = net(x)
            (out * cot).sum().backward()
            box["out"], box["grad"] = out, watched.grad
            sync()

    def take(name):
        return lambda: box[name].detach().float().cpu().numpy()

    return Kernel(
        step,
        take("out"),
        f"torch {torch.__version__}",
        "NCHW",
        math=math,
        grad=take("grad") if mode == "train" else None,
    )
