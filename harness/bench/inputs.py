"""Inputs for any model, made from its signature: shapes resolved, values sensible.

Rules (documented in docs/how-to/sweeps.md, "Any ONNX model"):

* Dimension 0 of an input is its batch dimension when it is dynamic; it
  takes the cell's batch size.  If every input has a fixed dimension 0 and
  they agree, the model has a fixed batch and runs at that batch only.
* Other dynamic dimensions take ``--shape NAME=AxBxC`` or trtexec's
  ``--shapes=NAME:AxB,...`` (``input_args``: the whole shape, several
  allowed; its batch entry is replaced by the batch size).  A symbolic dimension shared by several
  inputs (``seq`` in ids and
  mask) is set once for all.  There is no silent default: a dimension still
  unknown is an error naming the input, the dimension and a ``--shape`` to
  pass.
* Anonymous dimensions ("?", unset, tf2onnx's "unk__N": ``models.tensors``)
  are unknowns of their own; only a named symbol binds across dimensions.
* ``--input NAME=VALUE`` / ``NAME=FILE.npy`` (``bench.given``) set an input
  outright; a file also sets its input's dynamic dimensions.
* Floats are standard normal in their dtype, except a zoo model's box inputs
  (Mask R-CNN's ``rois``, ``mask_rois``: (..., 4), with the image's extent in the
  ranges), which are valid corner boxes inside the image; booleans and integer inputs
  named like a mask are ones; integer inputs that index an embedding table
  are uniform in [0, rows) (from the graph), or ``--int-range NAME=LOW:HIGH``
  ([LOW, HIGH)); any other integer input is zeros, a valid index anywhere,
  and the record says so.
* Every error about inputs ends with the model's whole signature (names,
  declared shapes, dtypes): the one line has what the user needs to fix it.

One seed drives the generator: the same seed gives the same bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.core.tensors import follow_batch
from dlbench.harness.backends.base import TensorInfo
from dlbench.harness.bench import given as given_mod
from dlbench.harness.bench.given import GivenInput, numpy_dtype

MASK = re.compile(r"mask", re.IGNORECASE)


@dataclass(frozen=True)
class PlannedInput:
    name: str
    dtype: str
    shape: tuple[int, ...]
    fill: str  # normal | boxes | ones | uniform | zeros | value | file
    low: int | None = None
    high: int | None = None
    given: GivenInput | None = None  # value | file: what the user set
    rows: str | None = None  # file: how its rows became the batch

    def describe(self) -> dict[str, Any]:
        d = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "fill": self.fill}
        if self.fill in ("uniform", "boxes"):
            d["range"] = [self.low, self.high]
        elif self.fill == "value":
            d["value"] = self.given.value
        elif self.fill == "file":
            g = self.given
            d.update(file=g.file, sha256=g.sha256, file_shape=list(g.shape), file_dtype=g.dtype)
            if self.rows:
                d["rows"] = self.rows
        return d


@dataclass
class InputPlan:
    batch_size: int
    inputs: list[PlannedInput]
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        return [i.describe() for i in self.inputs]


def _dynamic(d: Any) -> bool:
    return not isinstance(d, int) or d < 0


def _example(t: TensorInfo, batch: int) -> str:
    dims = [
        str(batch) if i == 0 and _dynamic(d) else (str(d) if not _dynamic(d) else "?")
        for i, d in enumerate(t.shape)
    ]
    return f"--shape {t.name}={'x'.join(dims)}"


def describe_signature(signature: Sequence[TensorInfo]) -> str:
    """``x [?, 3, ?, ?] float32, sr [] int64``: every input as the model declares it."""
    return ", ".join(t.describe() for t in signature) or "(none)"


def plan(
    signature: Sequence[TensorInfo],
    batch_size: int,
    shapes: dict[str, Sequence[int]] | None = None,
    int_ranges: dict[str, tuple[int, int]] | None = None,
    graph_ranges: dict[str, tuple[int, int]] | None = None,
    given: dict[str, Any] | None = None,
) -> InputPlan:
    """Concrete shapes and fills for one batch size; UserError if that cannot be done.

    ``given`` maps input names to what ``--input`` set: a value, a .npy path, or
    an already read ``GivenInput`` (the sweep reads each file once).
    """
    empty = [t.name for t in signature if t.shape and isinstance(t.shape[0], int) and t.shape[0] == 0]
    if empty:
        raise UserError(f"input {empty[0]} declares a batch of 0: a batch of no samples measures nothing")
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, got {batch_size}")
    try:
        p = _plan(
            signature,
            batch_size,
            dict(shapes or {}),
            int_ranges or {},
            graph_ranges or {},
            given_mod.read_all(given),
        )
        _check_size(p)
        return p
    except UserError as exc:
        raise UserError(f"{exc}; inputs: {describe_signature(signature)}") from None


def max_input_bytes() -> int:
    """The most one batch's inputs may take (``DLBENCH_MAX_INPUT_GB``; default 8 GiB or a
    quarter of the machine's memory, the smaller): a declared dimension of 2**31 would
    otherwise be allocated, in the parent and again in the cell, before anything says so."""
    import os

    import psutil

    given = os.environ.get("DLBENCH_MAX_INPUT_GB")
    if given is None:
        return min(8 * 2**30, psutil.virtual_memory().total // 4)
    try:
        return int(float(given) * 2**30)
    except ValueError:
        raise UserError("DLBENCH_MAX_INPUT_GB must be a number of GiB") from None


def _check_size(p: InputPlan) -> None:
    need = sum(math.prod(i.shape) * np.dtype(numpy_dtype(i.dtype)).itemsize for i in p.inputs)
    cap = max_input_bytes()
    if need > cap:
        shapes = ", ".join(f"{i.name} {list(i.shape)}" for i in p.inputs)
        raise UserError(
            f"batch {p.batch_size}'s inputs would take {need / 2**30:,.1f} GiB ({shapes}), over the "
            f"{cap / 2**30:.3g} GiB cap (DLBENCH_MAX_INPUT_GB raises it)"
        )


def _batched(t: TensorInfo) -> bool:
    return bool(t.shape) and _dynamic(t.shape[0])


def _plan(
    signature: Sequence[TensorInfo],
    batch_size: int,
    shapes: dict[str, Sequence[int]],
    int_ranges: dict[str, tuple[int, int]],
    graph_ranges: dict[str, tuple[int, int]],
    given: dict[str, GivenInput],
) -> InputPlan:
    by_name = {t.name: t for t in signature}
    for flag, table in (("--shape", shapes), ("--int-range", int_ranges), ("--input", given)):
        for name in table:
            if name not in by_name:
                raise UserError(f"{flag} {name}: the model has no input {name!r}")
    for name, g in given.items():
        t = by_name[name]
        if name in int_ranges:
            raise UserError(f"--input {name} and --int-range {name}: give one of them")
        given_mod.check(g, t)
        if g.file is None:
            continue
        if name in shapes:  # a file defines its input's shape itself
            asked = tuple(shapes[name])
            skip = 1 if _batched(t) else 0
            if len(asked) != len(g.shape) or asked[skip:] != g.shape[skip:]:
                raise UserError(
                    f"{g.flag}: the array is {'x'.join(map(str, g.shape))}, but "
                    f"--shape {name}={'x'.join(map(str, asked))}"
                )
        shapes[name] = g.shape
    notes: list[str] = []
    (batch,), note = follow_batch(signature, (batch_size,))
    if note:
        notes.append(note)

    # Symbolic names bound so far: batch dims first, then the user's shapes (and files).
    symbols: dict[str, int] = {}
    for t in signature:
        if t.shape and isinstance(t.shape[0], str):
            symbols[t.shape[0]] = batch
    for t in signature:
        if t.name not in shapes:
            continue
        source = given[t.name].flag if t.name in given and given[t.name].file else f"--shape {t.name}"
        given_shape = tuple(shapes[t.name])
        if len(given_shape) != len(t.shape):
            raise UserError(
                f"{source}: {len(given_shape)} dimensions given, but input {t.name!r} has {len(t.shape)}"
            )
        for i, (want, got) in enumerate(zip(t.shape, given_shape)):
            if i == 0 and _dynamic(want):
                continue  # the batch dimension follows --batch-sizes
            if not _dynamic(want) and want != got:
                raise UserError(f"{source}: dimension {i} is fixed at {want} in the model, got {got}")
            if isinstance(want, str):
                if symbols.get(want, got) != got:
                    raise UserError(
                        f"{source}: dimension {i} ({want!r}) is {got}, but "
                        f"{want!r} is {symbols[want]} elsewhere"
                    )
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
                raise UserError(
                    f"input {t.name!r} has a dynamic dimension {i}{label}: give "
                    f"its size with {_example(t, batch)}"
                )
        planned.append(_fill(t, tuple(dims), int_ranges, graph_ranges, given, notes))
    return InputPlan(batch, planned, notes)


def _fill(
    t: TensorInfo,
    shape: tuple[int, ...],
    int_ranges,
    graph_ranges,
    given: dict[str, GivenInput],
    notes: list[str],
) -> PlannedInput:
    try:
        kind = np.dtype(t.dtype).kind if t.dtype != "bfloat16" else "f"
    except TypeError:  # "undefined", "string", a damaged file's number: nothing to feed
        raise UserError(
            f"input {t.name} has element type {t.dtype!r}, which dlbench cannot make data for"
        ) from None
    if t.dtype in ("str", "object") or kind in ("U", "S", "O"):
        raise UserError(f"input {t.name!r} is {t.dtype}: dlbench synthesizes numeric and boolean inputs only")
    g = given.get(t.name)
    if g is not None and g.file is None:
        return PlannedInput(t.name, t.dtype, shape, "value", given=g)
    if g is not None:
        rows = given_mod.rows_note(g, shape[0]) if _batched(t) else None
        if rows:
            notes.append(f"input {t.name!r} from {g.file}: {rows}")
        return PlannedInput(t.name, t.dtype, shape, "file", given=g, rows=rows)
    if kind == "f" or kind == "c":
        if t.name in int_ranges:
            raise UserError(f"--int-range {t.name}: input {t.name!r} is {t.dtype}, not an integer")
        if t.name in graph_ranges and shape and shape[-1] == 4:  # boxes of the image
            lo, hi = graph_ranges[t.name]
            return PlannedInput(t.name, t.dtype, shape, "boxes", lo, hi)
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
    notes.append(
        f"integer input {t.name!r} indexes no table dlbench could find: filled with "
        f"zeros (set values with --int-range {t.name}=LOW:HIGH or --input "
        f"{t.name}=VALUE)"
    )
    return PlannedInput(t.name, t.dtype, shape, "zeros")


def synthesize(p: InputPlan, seed: int = 0) -> dict[str, np.ndarray]:
    """The arrays for ``p``, deterministic in ``seed``, C-contiguous."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in p.inputs:
        if i.fill == "normal":
            x = rng.standard_normal(i.shape, dtype=np.float32)
            out[i.name] = np.asarray(x.astype(numpy_dtype(i.dtype)), order="C")  # 0-d stays 0-d
        elif i.fill == "boxes":
            out[i.name] = random_boxes(rng, i.shape, i.low, i.high).astype(numpy_dtype(i.dtype))
        elif i.fill == "ones":
            out[i.name] = np.ones(i.shape, dtype=numpy_dtype(i.dtype))
        elif i.fill == "uniform":
            out[i.name] = rng.integers(i.low, i.high, size=i.shape).astype(i.dtype)
        elif i.fill in ("value", "file"):
            out[i.name] = given_mod.array(i.given, i.dtype, i.shape)
        else:
            out[i.name] = np.zeros(i.shape, dtype=numpy_dtype(i.dtype))
    return out


def random_boxes(rng: np.random.Generator, shape: Sequence[int], low: float, high: float) -> np.ndarray:
    """Corner boxes (x0, y0, x1, y1) of ``shape`` (..., 4) inside [low, high]^2: sides
    log-uniform from 1/32 to 1/2 of the extent (every RoI level of a pyramid is read),
    aspect 1/2..2, placed uniformly."""
    n = int(np.prod(shape[:-1]))
    extent = float(high - low)
    side = extent * np.exp(rng.uniform(np.log(1 / 32), np.log(1 / 2), n))
    aspect = np.exp(rng.uniform(np.log(0.5), np.log(2.0), n))
    wh = np.stack([side / np.sqrt(aspect), side * np.sqrt(aspect)], 1)
    lo = low + rng.uniform(0, 1, (n, 2)) * (extent - wh)
    return np.concatenate([lo, lo + wh], 1).reshape(*shape)
