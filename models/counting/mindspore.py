"""Parameter and multiply-add counts read off a built MindSpore network.

These deliberately measure the network as built (its Cells and the shapes its
layers actually produce) rather than re-reading the spec, so a test comparing
them with ``models.resnet.multiply_adds`` catches a wrong stride, padding or
width in the MindSpore implementation.
"""

from __future__ import annotations

import os

# Quiets MindSpore's INFO/WARNING logs; it reads GLOG_v once, at import.
os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn

from dlbench.models.counting import family_counter
from dlbench.models.registry import ModelSpec


def trainable_parameters(model: nn.Cell) -> int:
    return int(sum(int(np.prod(p.shape)) for p in model.trainable_params()))


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def forward_macs(model: nn.Cell, spec: ModelSpec) -> int:
    """Conv, dense and LSTM multiply-adds of one sample, from a traced batch-1 forward.

    Forward hooks only fire in PyNative mode, so the mode is switched for the
    trace and restored after; the network runs in inference mode so that the
    trace does not move batch-norm statistics.
    """
    family = family_counter(spec, "mindspore")
    if family is not None:
        return int(family(model, spec))
    macs = []

    def conv_hook(cell, _args, out):
        kh, kw = _pair(cell.kernel_size)
        oh, ow = out.shape[2], out.shape[3]
        macs.append(oh * ow * kh * kw * (cell.in_channels // cell.group) * cell.out_channels)

    def dense_hook(cell, _args, out):
        # A Dense on a (batch, ..., features) input runs once per position.
        macs.append(int(np.prod(out.shape[1:-1])) * cell.in_channels * cell.out_channels)

    def lstm_hook(cell, _args, out):
        # 4·hidden·(input + hidden) per time step, layer and direction.
        output = out[0]
        steps = output.shape[1] if cell.batch_first else output.shape[0]
        macs.append(steps * sum(int(np.prod(w.shape)) for w in (*cell.w_ih_list, *cell.w_hh_list)))

    handles = []
    for _, cell in model.cells_and_names():
        if isinstance(cell, nn.Conv2d):
            handles.append(cell.register_forward_hook(conv_hook))
        elif isinstance(cell, nn.Dense):
            handles.append(cell.register_forward_hook(dense_hook))
        elif isinstance(cell, nn.LSTM):
            handles.append(cell.register_forward_hook(lstm_hook))
    trace(model, handles, one_sample(spec))
    return int(sum(macs))


def one_sample(spec: ModelSpec, fill: int = 0) -> list[np.ndarray]:
    """A batch of one, every input filled with ``fill`` in its own dtype (0: a valid token
    id as well as an image)."""
    return [
        np.full((1, *i.shape), fill, i.dtype if i.dtype.startswith("int") else np.float32)
        for i in spec.inputs
    ]


def trace(model: nn.Cell, handles: list, inputs: list[np.ndarray]) -> None:
    """One forward of ``model`` on ``inputs`` for its forward hooks to count: in PyNative
    mode (hooks fire only there) and inference mode (batch-norm statistics stay put);
    the hooks are removed and the mode and training flag restored after."""
    mode, was_training = ms.get_context("mode"), model.training
    try:
        ms.set_context(mode=ms.PYNATIVE_MODE)
        model.set_train(False)
        model(*[ms.Tensor(a) for a in inputs])
    finally:
        for h in handles:
            h.remove()
        model.set_train(was_training)
        ms.set_context(mode=mode)
