"""numpy: the BLAS its wheel ships (OpenBLAS) for GEMM, plain ufuncs for the streams.

numpy has no convolution kernel and no bf16 or int8 GEMM (an int8 ``matmul``
is a scalar loop, not BLAS), so it offers what a baseline measures.  Its
triad is two passes (``multiply`` then ``add``): numpy has no fused kernel,
and the record says so.
"""

from __future__ import annotations

import numpy as np

from dlbench.harness.micro.engines import TRIAD_SCALAR, Kernel

FRAMEWORK = "numpy"
DEVICES = ("cpu",)
SUPPORTS = {"gemm": ("fp32",), "memory": ("fp32",)}


def _library() -> str:
    try:
        deps = np.show_config(mode="dicts").get("Build Dependencies", {})
        blas = deps.get("blas", {}).get("name")
    except TypeError:
        blas = None
    return f"numpy {np.__version__}" + (f" ({blas})" if blas else "")


def build(op, precision, device, inputs, threads) -> Kernel:
    lib = _library()
    if op.kind == "gemm":
        a, b = inputs["a"], inputs["b"]
        out = np.empty((a.shape[0], b.shape[1]), np.float32)
        return Kernel(lambda: np.matmul(a, b, out=out), lambda: out, lib)
    a, b, c = inputs["a"].copy(), inputs["b"], inputs["c"]
    if op.kernel == "copy":
        out = np.empty_like(a)
        return Kernel(lambda: np.copyto(out, a), lambda: out, lib)

    def triad():
        np.multiply(c, TRIAD_SCALAR, out=a)
        np.add(a, b, out=a)

    return Kernel(
        triad, lambda: a, lib, notes=["triad in two passes (numpy has no fused multiply-add ufunc)"]
    )
