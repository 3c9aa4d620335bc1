"""Parameter and multiply-add counts read off a built PyTorch network.

``forward_macs`` deliberately runs the real module and measures the output
shape of every conv and linear layer instead of reading the spec: the point is
to catch a network that differs from ``models.resnet.walk`` (a wrong stride or
padding changes the output sizes, hence the count).
"""

from __future__ import annotations

import torch
from torch import nn

from dlbench.models.counting import family_counter
from dlbench.models.registry import ModelSpec


def trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _lstm_macs(module: nn.LSTM, output) -> int:
    """4·hidden·(input + hidden) per time step, layer and direction; the time steps
    are read off the real output (batch-first or not)."""
    out = output[0]
    steps = out.shape[1] if module.batch_first else out.shape[0]
    dirs = 2 if module.bidirectional else 1
    hidden, total = module.hidden_size, 0
    for layer in range(module.num_layers):
        cin = module.input_size if layer == 0 else hidden * dirs
        total += dirs * 4 * hidden * (cin + hidden)
    return steps * total


def layer_macs(module: nn.Module, output: torch.Tensor, inputs: tuple = ()) -> int:
    """MACs of one call on a batch-1 probe.  A layer that runs on a batch of its own (a
    detector's heads on each box) counts every row of it: the leading dimension."""
    if isinstance(module, nn.LSTM):
        return _lstm_macs(module, output)
    if isinstance(module, nn.ConvTranspose2d):  # k*k*cout per input pixel and channel
        kh, kw = module.kernel_size
        n, _, in_h, in_w = inputs[0].shape
        return n * in_h * in_w * kh * kw * module.in_channels * module.out_channels
    if isinstance(module, nn.Conv2d):
        kh, kw = module.kernel_size
        n, _, out_h, out_w = output.shape
        return n * out_h * out_w * kh * kw * module.in_channels * module.out_channels // module.groups
    # Linear: in * out for every position (and row) the layer is applied at.
    return output[..., 0].numel() * module.in_features * module.out_features


def forward_macs(model: nn.Module, spec: ModelSpec) -> int:
    """Conv, dense and LSTM multiply-adds of one forward pass on one sample of ``spec``'s inputs."""
    family = family_counter(spec, "pytorch")
    if family is not None:
        return int(family(model, spec))
    total = 0

    def hook(module, inputs, output):
        nonlocal total
        total += layer_macs(module, output, inputs)

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear, nn.LSTM))
    ]
    param = next(model.parameters())
    # Zeros of each input's own dtype: a valid token id as well as an image.
    xs = [
        torch.zeros(
            (1, *i.shape),
            device=param.device,
            dtype=getattr(torch, i.dtype) if i.dtype.startswith("int") else param.dtype,
        )
        for i in spec.inputs
    ]
    was_training = model.training
    try:
        # eval + no_grad: a probe must not move BN running statistics.
        model.eval()
        with torch.no_grad():
            model(*xs)
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    return int(total)
