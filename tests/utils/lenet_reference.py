"""LeNet-5 in plain numpy, from canonical weights (``models.weights``' names and layouts).

The per-framework tests compare each builder's logits with this: it pins the
layer order, the "valid" convs, the 2x2 pools and, above all, the flatten
order (C, H, W) that the first dense layer's canonical weight assumes; a Keras
build that flattened NHWC would compute something else with the same weights.
No framework is imported here.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = w.shape[-1]
    win = sliding_window_view(x, (k, k), axis=(2, 3))  # N, C, H', W', k, k
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True) + b[None, :, None, None]


def _pool(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def logits(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Eval logits of LeNet-5 for NCHW float ``x``, computed in float64."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    h = np.asarray(x, np.float64)
    for name in ("conv1", "conv2"):
        h = _pool(np.maximum(_conv(h, w[f"{name}.weight"], w[f"{name}.bias"]), 0))
    h = h.reshape(len(h), -1)  # (C, H, W) order
    for name in ("fc1", "fc2"):
        h = np.maximum(h @ w[f"{name}.weight"].T + w[f"{name}.bias"], 0)
    return h @ w["fc3.weight"].T + w["fc3.bias"]
