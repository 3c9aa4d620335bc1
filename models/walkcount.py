"""Parameter and multiply-add counts of a CNN described as a walk of plain ops.

A family's ``walk(cfg)`` yields, in network order, ``("conv", cin, cout, k,
stride, out_hw)``, ``("bn", channels)``, ``("bias", channels)``, ``("fc",
cin, cout)`` and ``("pool", "max"|"avg", channels, k, stride, pad, in_hw)``
(a global average pool is k = in_hw), ``("deconv", cin, cout, k, stride, in_hw)``
(a transposed conv: k*k*cout multiply-adds per input pixel and input channel),
and two wrappers for layers that run more than once a sample: ``("roi", n, op)``
runs ``op`` on each of n boxes (its weights once, its multiply-adds n times) and
``("shared", op)`` reruns an earlier layer's weights (multiply-adds only); these sums are the framework-free
reference every framework's real network is tested against.  Pools count
nothing (no parameters, no multiply-adds) but are listed, so that ``dlbench
layer --model`` can time them with the network's own windows.  A convolution's bias is its own op, because
in networks with batch norm (most here) the conv has none: BN's mean
subtraction would cancel it; VGG's convolutions, without BN, carry one.  Batch
norm trains gamma and beta only, and element-wise work (BN, ReLU, pooling,
residual additions, concatenation) is left out of the multiply-adds, as
published FLOP figures for these networks do.
"""

from __future__ import annotations

from collections.abc import Iterable


def parameters(ops: Iterable[tuple]) -> int:
    total = 0
    for op in ops:
        if op[0] == "roi":
            op = op[2]
        if op[0] in ("pool", "shared"):
            continue
        if op[0] in ("conv", "deconv"):
            _, cin, cout, k, _, _ = op
            total += cin * cout * k * k
        elif op[0] == "bn":
            total += 2 * op[1]
        elif op[0] == "bias":
            total += op[1]
        else:
            total += op[1] * op[2] + op[2]
    return total


def multiply_adds(ops: Iterable[tuple]) -> int:
    total = 0
    for op in ops:
        times = 1
        if op[0] == "roi":
            times, op = op[1], op[2]
        elif op[0] == "shared":
            op = op[1]
        if op[0] in ("conv", "deconv"):  # deconv: hw is the input's side
            _, cin, cout, k, _, hw = op
            total += times * hw * hw * k * k * cin * cout
        elif op[0] == "fc":
            total += times * op[1] * op[2]
    return total


def lstm_parameters(cin: int, hidden: int) -> int:
    """One LSTM layer and direction: four gates' input and recurrent weights and one
    trainable bias per gate set (the zoo's convention; PyTorch's and MindSpore's second
    bias is frozen at zero)."""
    return 4 * hidden * (cin + hidden) + 4 * hidden


def lstm_multiply_adds(cin: int, hidden: int, steps: int) -> int:
    """One LSTM layer and direction over ``steps``: its gate matrix products (the gate
    nonlinearities and element-wise products are left out, as for the CNNs' BN and ReLU)."""
    return steps * 4 * hidden * (cin + hidden)
