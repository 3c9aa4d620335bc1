"""Isolated layers on PyTorch, TensorFlow, MindSpore and ONNX Runtime, forward and
forward + backward, with equal inputs and weights: each engine's output (and
input gradient) is compared with the first engine's, so a layer benchmark is
also an equivalence check.  ``--model resnet50`` times the layers of a zoo
network (each distinct convolution, the batch norm and ReLU on its output,
the classifier).  The cells, records (``micro`` kind, ``context.mode``),
``--with`` axis and ``compare`` are ``dlbench micro``'s.  Exit status: 0
every cell ran and agreed, 1 a cell failed or disagreed, 2 bad input.
"""

from __future__ import annotations

HELP = "isolated layers (conv, dense, norms, pooling, LSTM, ...) across frameworks, checked equal"


def add_arguments(p) -> None:
    from dlbench.harness.commands import micro

    shape = (
        "the layer's shape (see docs/how-to/micro-layer.md, e.g. conv 16x64x56x56:64k3, "
        "dense 32x2048x1000, lstm 32x50x128:256); repeat"
    )
    micro.add_common_arguments(p, {"shapes": shape}, skip={"kind"}, layer=True)


def run(args) -> int:
    from dlbench.harness.commands import micro

    return micro.run_request(micro.request_from(args, kind="layer"), args.quiet)
