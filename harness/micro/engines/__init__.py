"""Engines that run the micro ops: one module each, registered here by name.

An engine module has ``FRAMEWORK`` (the distribution whose version a record
names), ``SUPPORTS`` (op kind -> precisions it has a kernel for), ``DEVICES``
and ``build(op, precision, device, inputs, threads) -> Kernel``.  ``SUPPORTS``
is what the engine's public API offers, checked in the parent before any cell
starts; a combination the API offers but a build lacks (a CPU with no bf16
kernel) fails its cell with the engine's own message.

Every engine gets the same numpy inputs (``make_inputs``), made before the
clock, and hands back its output in the common layout (NCHW), so the cell
checks each kernel against a numpy reference: a kernel that skipped work or
computed something else fails its cell instead of setting a record.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ENGINES = {
    "numpy": "dlbench.harness.micro.engines.numpy_blas",
    "pytorch": "dlbench.harness.micro.engines.torch_ops",
    "tensorflow": "dlbench.harness.micro.engines.tf_ops",
    "mindspore": "dlbench.harness.micro.engines.ms_ops",
    "onnxruntime": "dlbench.harness.micro.engines.ort_ops",
}
# dlbench layer: one-layer networks (harness.micro.layers); SUPPORTS maps a mode to precisions.
LAYER_ENGINES = {
    "pytorch": "dlbench.harness.micro.engines.torch_layers",
    "tensorflow": "dlbench.harness.micro.engines.tf_layers",
    "mindspore": "dlbench.harness.micro.engines.ms_layers",
    "onnxruntime": "dlbench.harness.micro.engines.ort_layers",
}
# The precisions micro and layer cells know (each engine's SUPPORTS says which it has;
# an engine's SUPPORTS_ON adds what only a device has: tf32 and fp16 on a GPU).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")


@dataclass
class Kernel:
    step: Callable[[], Any]  # one call, finished when it returns
    output: Callable[[], np.ndarray]  # the last result, as numpy, NCHW for convolutions
    library: str  # engine and version (and the math library)
    layout: str = ""  # NHWC when the engine's fast path is
    notes: list[str] = field(default_factory=list)
    math: dict[str, Any] | None = None  # float32 math mode in force (harness.cells.mathmode)
    # A layer's train step: the gradient of its input (an embedding: of its table).
    grad: Callable[[], np.ndarray] | None = None


def module(name: str, layer: bool = False):
    return importlib.import_module((LAYER_ENGINES if layer else ENGINES)[name])


def make_inputs(op, precision: str, seed: int = 0) -> dict[str, np.ndarray]:
    """The op's operands, made once, equal for every engine (seeded)."""
    rng = np.random.default_rng(seed)
    if precision == "int8":

        def draw(shape):
            return rng.integers(-8, 8, size=shape, dtype=np.int8)
    else:

        def draw(shape):
            return rng.standard_normal(shape, dtype=np.float32)

    if op.kind == "gemm":
        m, k, n = op.dims
        return {"a": draw((m, k)), "b": draw((k, n))}
    if op.kind == "conv":
        n, c, h, w, k, r, _ = op.dims
        return {"x": draw((n, c, h, w)), "w": draw((k, c, r, r)) / np.float32(np.sqrt(c * r * r))}
    size = op.dims[0]
    return {"a": draw((size,)), "b": draw((size,)), "c": draw((size,))}


TRIAD_SCALAR = 3.0


def reference(op, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, Callable[[np.ndarray], Any]]:
    """(expected, how to take the same slice of an engine's output): a few rows of a
    GEMM, one image and one output channel of a convolution, the head of a stream."""
    if op.kind == "gemm":
        a, b = inputs["a"], inputs["b"]
        rows = min(8, a.shape[0])
        return a[:rows].astype(np.float64) @ b.astype(np.float64), lambda out: out[:rows]
    if op.kind == "conv":
        x, w = inputs["x"][0].astype(np.float64), inputs["w"][0].astype(np.float64)
        _, _, _, _, _, r, s = op.dims
        pad = r // 2
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
        oh, ow = op.out_hw()
        acc = np.zeros((oh, ow))
        for i in range(r):
            for j in range(r):
                patch = xp[:, i : i + s * (oh - 1) + 1 : s, j : j + s * (ow - 1) + 1 : s]
                acc += np.tensordot(w[:, i, j], patch, axes=1)
        return acc, lambda out: out[0, 0]
    head = min(4096, op.dims[0])
    if op.kernel == "copy":
        return inputs["a"][:head].astype(np.float64), lambda out: out[:head]
    b, c = inputs["b"][:head], inputs["c"][:head]
    return b.astype(np.float64) + TRIAD_SCALAR * c.astype(np.float64), lambda out: out[:head]


# Relative error (max |got - want| / max |want|) a precision's result may have.
# tf32 and fp16 round the operands to 10 mantissa bits (fp16 also its output): about 5e-4.
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2, "int8": 0.0}


def supports(mod, kind: str, device: str) -> tuple[str, ...]:
    """The precisions an engine module has for ``kind`` on ``device``."""
    return getattr(mod, "SUPPORTS_ON", {}).get(device, mod.SUPPORTS).get(kind, ())


def check(op, precision: str, inputs: dict[str, np.ndarray], kernel: Kernel) -> float:
    """The kernel's relative error on the reference slice; raises when it is out of bounds."""
    want, take = reference(op, inputs)
    got = np.asarray(take(kernel.output()), dtype=np.float64)
    if got.shape != want.shape:
        raise RuntimeError(
            f"{kernel.library} returned shape {got.shape} for the checked slice, expected {want.shape}"
        )
    scale = float(np.max(np.abs(want))) or 1.0
    err = float(np.max(np.abs(got - want))) / scale
    if not err <= TOLERANCE[precision]:
        raise RuntimeError(
            f"{kernel.library} computed a wrong {op.label} ({precision}): relative "
            f"error {err:.3g} > {TOLERANCE[precision]:g} against numpy in float64"
        )
    return err
