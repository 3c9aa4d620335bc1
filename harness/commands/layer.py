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
    from dlbench.harness.micro.layers import MODES, TYPES

    p.add_argument(
        "layer",
        nargs="?",
        choices=TYPES,
        help="the layer type (with --shape), or a filter on --model's layers",
    )
    p.add_argument(
        "--mode",
        action="append",
        default=None,
        help=f"{', '.join(MODES)}: forward, or forward + backward (input and weight "
        f"gradients); repeat or comma-separate (default forward)",
    )
    micro.add_common_arguments(p, layer=True)


def run(args) -> int:
    from dlbench.harness.bench.request import split
    from dlbench.harness.commands import micro

    req = micro.request_from(args, kind="layer")
    req.layer, req.modes = args.layer, split(args.mode) or ["forward"]
    return micro.run_request(req, args.quiet)
