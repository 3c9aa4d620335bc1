"""Parameter and multiply-add counts read off a built PyTorch network.

``forward_macs`` deliberately runs the real module and measures the output
shape of every conv and linear layer instead of reading the spec: the point is
to catch a network that differs from ``models.resnet.walk`` (a wrong stride or
padding changes the output sizes, hence the count).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from models.registry import ModelSpec


def trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _layer_macs(module: nn.Module, output: torch.Tensor) -> int:
    """MACs for one sample (the probe batch has size 1)."""
    if isinstance(module, nn.Conv2d):
        kh, kw = module.kernel_size
        out_h, out_w = output.shape[-2:]
        return (out_h * out_w * kh * kw * module.in_channels * module.out_channels
                // module.groups)
    # Linear: in * out for every position the layer is applied at.
    positions = math.prod(output.shape[1:-1])
    return positions * module.in_features * module.out_features


def forward_macs(model: nn.Module, spec: ModelSpec) -> int:
    """Conv and dense multiply-adds of one forward pass on one sample of ``spec``'s input."""
    total = 0

    def hook(module, _inputs, output):
        nonlocal total
        total += _layer_macs(module, output)

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv2d, nn.Linear))]
    param = next(model.parameters())
    x = torch.zeros((1, *spec.inputs[0].shape), dtype=param.dtype, device=param.device)
    was_training = model.training
    try:
        # eval + no_grad: a probe must not move BN running statistics.
        model.eval()
        with torch.no_grad():
            model(x)
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    return int(total)
