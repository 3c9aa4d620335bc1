"""LSTM weights between the canonical (PyTorch) layout and the others; no framework here.

Canonical arrays of an LSTM layer are PyTorch's parameters, per layer ``k``
and direction (``_reverse`` for the backward one): ``weight_ih_l{k}``
(4·hidden, input), ``weight_hh_l{k}`` (4·hidden, hidden), ``bias_ih_l{k}`` and
``bias_hh_l{k}`` (4·hidden), gates stacked i, f, g, o.  MindSpore's ``nn.LSTM``
has the same arrays under the same names.  Keras' LSTM cell stores
``kernel`` (input, 4·units) and ``recurrent_kernel`` (units, 4·units), the
transposes, with gates in the same order (Keras calls g "c"), and ONE
``bias``: it receives ``bias_ih + bias_hh``, and exports ``bias_ih`` = its
bias, ``bias_hh`` = 0 — the same function, which is what the zoo's LSTM
networks rely on (their ``bias_hh`` is frozen at zero).
"""

from __future__ import annotations

import numpy as np

from dlbench.models.weights import WeightMismatch


def suffixes(layer: int = 0, reverse: bool = False) -> tuple[str, str, str, str]:
    tail = f"_l{layer}" + ("_reverse" if reverse else "")
    return (f"weight_ih{tail}", f"weight_hh{tail}", f"bias_ih{tail}", f"bias_hh{tail}")


def take(mine: dict[str, np.ndarray], expected: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """``mine`` checked against ``expected`` (suffix -> shape): same keys, same shapes."""
    missing = [k for k in expected if k not in mine]
    surplus = [k for k in mine if k not in expected]
    if missing or surplus:
        raise WeightMismatch(
            f"LSTM arrays do not match: missing {missing[:3] or 'none'}, unexpected {surplus[:3] or 'none'}"
        )
    for key, shape in expected.items():
        if tuple(mine[key].shape) != tuple(shape):
            raise WeightMismatch(
                f"LSTM array {key}: shape {tuple(mine[key].shape)} does not fit the layer's {tuple(shape)}"
            )
    return {k: np.asarray(mine[k], dtype=np.float32) for k in expected}


def keras_to_canonical(
    kernel, recurrent, bias, layer: int = 0, reverse: bool = False
) -> dict[str, np.ndarray]:
    w_ih, w_hh, b_ih, b_hh = suffixes(layer, reverse)
    out = {
        w_ih: np.ascontiguousarray(np.asarray(kernel).T),
        w_hh: np.ascontiguousarray(np.asarray(recurrent).T),
    }
    if bias is not None:
        out[b_ih] = np.asarray(bias)
        out[b_hh] = np.zeros_like(out[b_ih])
    return out


def canonical_to_keras(
    mine: dict[str, np.ndarray], cin: int, units: int, use_bias: bool, layer: int = 0, reverse: bool = False
):
    """(kernel, recurrent_kernel, bias or None) for one Keras LSTM from its canonical arrays."""
    w_ih, w_hh, b_ih, b_hh = suffixes(layer, reverse)
    expected = {w_ih: (4 * units, cin), w_hh: (4 * units, units)}
    if use_bias:
        expected.update({b_ih: (4 * units,), b_hh: (4 * units,)})
    arrays = take(mine, expected)
    bias = arrays[b_ih] + arrays[b_hh] if use_bias else None
    return (np.ascontiguousarray(arrays[w_ih].T), np.ascontiguousarray(arrays[w_hh].T), bias)
