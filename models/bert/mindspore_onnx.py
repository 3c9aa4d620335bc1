"""An exact-GELU rewrite that MindSpore's ONNX exporter can convert.

MindSpore 2.8's ``mindspore.onnx.export`` has no conversion for ``Erf``
("Can not find key Erf in convert map. Exporting Erf operator is not yet
supported."), so a network with ``nn.GELU(approximate=False)`` (BERT's exact
GELU) cannot be exported; everything else in BERT converts.  Before export,
``rewrite_exact_gelu`` replaces each such GELU with ``ErfFreeGELU``: x * Phi(x)
with Phi from Abramowitz & Stegun 7.1.26 (|error of erf| <= 1.5e-7), built from
Abs, Mul, Add, Div, Exp, Greater and Cast, which the exporter converts.  Over
[-8, 8] it is within 6.3e-7 of the float64 exact GELU, where MindSpore's own
float32 kernel is within 4.5e-7: the difference is float32 rounding, not a
different function, and the export verifier compares the ONNX file with the
unmodified network anyway.  The training network keeps MindSpore's native GELU.

(The Cell lives in its own module because GRAPH_MODE compiles the source of
``construct``.)
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("GLOG_v", "3")

from mindspore import nn, ops

# Abramowitz & Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 + ...)) exp(-z^2), t = 1 / (1 + p z).
P = 0.3275911
A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


class ErfFreeGELU(nn.Cell):
    """x * Phi(x), Phi the standard normal CDF, without an Erf operator."""

    def __init__(self):
        super().__init__()
        self.inv_sqrt2 = 1.0 / math.sqrt(2.0)

    def construct(self, x):
        z = ops.abs(x) * self.inv_sqrt2
        t = 1.0 / (1.0 + P * z)
        poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))))
        tail = 0.5 * poly * ops.exp(-z * z)  # 1 - Phi(|x|)
        positive = (x > 0).astype(x.dtype)
        return x * (tail + positive * (1.0 - 2.0 * tail))


def rewrite_exact_gelu(net: nn.Cell) -> list[str]:
    """Replace every ``nn.GELU(approximate=False)`` in ``net``; return the names replaced."""
    replaced = []
    for parent_name, parent in list(net.cells_and_names()):
        for name, child in list(parent.name_cells().items()):
            # MindSpore 2.8 keeps ``approximate`` as the string "none" or "tanh".
            if isinstance(child, nn.GELU) and getattr(child, "approximate", None) in ("none", False):
                if isinstance(parent, nn.SequentialCell):  # construct iterates cell_list
                    parent[list(parent.name_cells()).index(name)] = ErfFreeGELU()
                else:
                    parent._cells[name] = ErfFreeGELU()
                replaced.append(f"{parent_name + '.' if parent_name else ''}{name}")
    return replaced


def onnx_rewrites(net: nn.Cell) -> list[str]:
    """The BERT family's ONNX-export rewrites (``converters.mindspore_to_onnx``'s hook)."""
    return [
        f"{name}: GELU(exact, Erf) -> ErfFreeGELU (A&S 7.1.26, |err| < 1e-6)"
        for name in rewrite_exact_gelu(net)
    ]
