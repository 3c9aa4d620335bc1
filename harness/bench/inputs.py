"""Inputs for any model, made from its signature: shapes resolved, values sensible.

Rules (documented in README "Benchmark"):

* Dimension 0 of an input is its batch dimension when it is dynamic; it
  takes the cell's batch size.  If every input has a fixed dimension 0 and
  they agree, the model has a fixed batch and runs at that batch only.
* Other dynamic dimensions take ``--shape NAME=AxBxC`` (trtexec-style, the
  whole shape, several allowed; its batch entry is replaced by the batch
  size).  A symbolic dimension shared by several inputs (``seq`` in ids and
  mask) is set once for all.  There is no silent default: a dimension still
  unknown is an error naming the input, the dimension and a ``--shape`` to
  pass.
* Floats are standard normal in their dtype; booleans and integer inputs
  named like a mask are ones; integer inputs that index an embedding table
  are uniform in [0, rows) (from the graph), or ``--int-range NAME=LOW:HIGH``
  ([LOW, HIGH)); any other integer input is zeros, a valid index anywhere,
  and the record says so.

One seed drives the generator: the same seed gives the same bytes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from dlbench.harness.backends.base import TensorInfo
from dlbench.models.errors import UserError

MASK = re.compile(r"mask", re.IGNORECASE)


@dataclass(frozen=True)
class PlannedInput:
    name: str
    dtype: str
    shape: tuple[int, ...]
    fill: str                          # normal | ones | uniform | zeros
    low: int | None = None
    high: int | None = None

    def describe(self) -> dict[str, Any]:
        d = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "fill": self.fill}
        if self.fill == "uniform":
            d["range"] = [self.low, self.high]
        return d


@dataclass
class InputPlan:
    batch_size: int
    inputs: list[PlannedInput]
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        return [i.describe() for i in self.inputs]


def parse_shape(arg: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=1x3x224x224`` (trtexec's --shapes syntax, one input per flag)."""
    name, sep, dims = arg.rpartition("=")
    if not sep or not name or not dims:
        raise UserError(f"--shape {arg!r}: expected NAME=DIMxDIMx... (e.g. input=1x3x224x224)")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise UserError(f"--shape {arg!r}: dimensions must be integers separated by 'x'") from None
    if any(d < 1 for d in shape):
        raise UserError(f"--shape {arg!r}: every dimension must be at least 1")
    return name, shape


def parse_int_range(arg: str) -> tuple[str, tuple[int, int]]:
    """``NAME=LOW:HIGH``: integers drawn uniformly from [LOW, HIGH)."""
    name, sep, rng = arg.rpartition("=")
    low, colon, high = rng.partition(":")
    try:
        if not sep or not name or not colon:
            raise ValueError
        lo, hi = int(low), int(high)
    except ValueError:
        raise UserError(f"--int-range {arg!r}: expected NAME=LOW:HIGH (e.g. input_ids=0:30522)") \
            from None
    if hi <= lo:
        raise UserError(f"--int-range {arg!r}: HIGH must be greater than LOW (the range is [LOW, HIGH))")
    return name, (lo, hi)


def _dynamic(d: Any) -> bool:
    return not isinstance(d, int) or d < 0


def fixed_batch(signature: Sequence[TensorInfo]) -> int | None:
    """The batch a model is fixed to, or None if its batch dimension is dynamic."""
    firsts = [t.shape[0] for t in signature if t.shape]
    if not firsts or any(_dynamic(d) for d in firsts):
        return None
    return firsts[0] if len(set(firsts)) == 1 else None


def _example(t: TensorInfo, batch: int) -> str:
    dims = [str(batch) if i == 0 and _dynamic(d) else (str(d) if not _dynamic(d) else "?")
            for i, d in enumerate(t.shape)]
    return f"--shape {t.name}={'x'.join(dims)}"


def _describe(t: TensorInfo) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in t.shape) + "]"


def plan(signature: Sequence[TensorInfo], batch_size: int,
         shapes: dict[str, Sequence[int]] | None = None,
         int_ranges: dict[str, tuple[int, int]] | None = None,
         graph_ranges: dict[str, tuple[int, int]] | None = None) -> InputPlan:
    """Concrete shapes and fills for one batch size; UserError if that cannot be done."""
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, got {batch_size}")
    shapes, int_ranges, graph_ranges = shapes or {}, int_ranges or {}, graph_ranges or {}
    names = [t.name for t in signature]
    for flag, given in (("--shape", shapes), ("--int-range", int_ranges)):
        for name in given:
            if name not in names:
                raise UserError(f"{flag} {name}: the model has no input {name!r}; its inputs: "
                                f"{', '.join(names) or '(none)'}")
    notes: list[str] = []
    fixed = fixed_batch(signature)
    batch = batch_size
    if fixed is not None and fixed != batch_size:
        batch = fixed
        notes.append(f"the model's batch dimension is fixed at {fixed}: ran batch {fixed} "
                     f"(asked for {batch_size})")

    # Symbolic names bound so far: batch dims first, then the user's shapes.
    symbols: dict[str, int] = {}
    for t in signature:
        if t.shape and isinstance(t.shape[0], str):
            symbols[t.shape[0]] = batch
    for t in signature:
        if t.name not in shapes:
            continue
        given = tuple(shapes[t.name])
        if len(given) != len(t.shape):
            raise UserError(f"--shape {t.name}: {len(given)} dimensions given, but input "
                            f"{t.name!r} has {len(t.shape)} (shape {_describe(t)})")
        for i, (want, got) in enumerate(zip(t.shape, given)):
            if i == 0 and _dynamic(want):
                continue                      # the batch dimension follows --batch-sizes
            if not _dynamic(want) and want != got:
                raise UserError(f"--shape {t.name}: dimension {i} is fixed at {want} in the "
                                f"model, got {got}")
            if isinstance(want, str):
                if symbols.get(want, got) != got:
                    raise UserError(f"--shape {t.name}: dimension {i} ({want!r}) is {got}, but "
                                    f"{want!r} is {symbols[want]} elsewhere")
                symbols[want] = got

    planned = []
    for t in signature:
        dims = []
        for i, d in enumerate(t.shape):
            if not _dynamic(d):
                dims.append(d)
            elif i == 0:
                dims.append(batch)
            elif t.name in shapes:
                dims.append(int(shapes[t.name][i]))
            elif isinstance(d, str) and d in symbols:
                dims.append(symbols[d])
            else:
                label = f" ({d!r})" if isinstance(d, str) else ""
                raise UserError(f"input {t.name!r} has a dynamic dimension {i}{label} "
                                f"(shape {_describe(t)}): give its size with {_example(t, batch)}")
        planned.append(_fill(t, tuple(dims), int_ranges, graph_ranges, notes))
    return InputPlan(batch, planned, notes)


def _fill(t: TensorInfo, shape: tuple[int, ...], int_ranges, graph_ranges,
          notes: list[str]) -> PlannedInput:
    kind = np.dtype(t.dtype).kind if t.dtype != "bfloat16" else "f"
    if t.dtype in ("str", "object") or kind in ("U", "S", "O"):
        raise UserError(f"input {t.name!r} is {t.dtype}: dlbench synthesizes numeric and "
                        f"boolean inputs only")
    if kind == "f" or kind == "c":
        if t.name in int_ranges:
            raise UserError(f"--int-range {t.name}: input {t.name!r} is {t.dtype}, not an integer")
        return PlannedInput(t.name, t.dtype, shape, "normal")
    if kind == "b":
        return PlannedInput(t.name, t.dtype, shape, "ones")
    if t.name in int_ranges:
        lo, hi = int_ranges[t.name]
        info = np.iinfo(np.dtype(t.dtype))
        if lo < info.min or hi - 1 > info.max:
            raise UserError(f"--int-range {t.name}: [{lo}, {hi}) does not fit {t.dtype}")
        return PlannedInput(t.name, t.dtype, shape, "uniform", lo, hi)
    if MASK.search(t.name):
        return PlannedInput(t.name, t.dtype, shape, "ones")
    if t.name in graph_ranges:
        lo, hi = graph_ranges[t.name]
        return PlannedInput(t.name, t.dtype, shape, "uniform", lo, hi)
    notes.append(f"integer input {t.name!r} indexes no table dlbench could find: filled with "
                 f"zeros (set values with --int-range {t.name}=LOW:HIGH)")
    return PlannedInput(t.name, t.dtype, shape, "zeros")


def synthesize(p: InputPlan, seed: int = 0) -> dict[str, np.ndarray]:
    """The arrays for ``p``, deterministic in ``seed``, C-contiguous."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in p.inputs:
        if i.fill == "normal":
            x = rng.standard_normal(i.shape, dtype=np.float32)
            out[i.name] = np.ascontiguousarray(x.astype(_numpy_dtype(i.dtype)))
        elif i.fill == "ones":
            out[i.name] = np.ones(i.shape, dtype=_numpy_dtype(i.dtype))
        elif i.fill == "uniform":
            out[i.name] = rng.integers(i.low, i.high, size=i.shape).astype(i.dtype)
        else:
            out[i.name] = np.zeros(i.shape, dtype=_numpy_dtype(i.dtype))
    return out


def _numpy_dtype(name: str):
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise UserError("bfloat16 inputs need the ml_dtypes package (pip install ml_dtypes)") \
                from None
        return ml_dtypes.bfloat16
    return np.dtype(name)
