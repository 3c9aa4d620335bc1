"""Inputs the user sets instead of dlbench (``--input NAME=VALUE`` / ``NAME=FILE.npy``).

A value is one number (or true/false) for every element of the input, in the
model's dtype; it must fit that dtype exactly (16000 in an int8 input, 0.5 in
an int64 one or 16777217 in a float32 one would be a different value, so they
are refused).  A file is the user's own array: its rank and the model's fixed
dimensions must match, its other dimensions set the input's dynamic ones (and
bind the symbols they share with other inputs), and its dtype is cast to the
model's only when NumPy calls that cast safe.

The batch dimension (a dynamic dimension 0) keeps following ``--batch-sizes``,
because that is the axis a sweep measures: batch B takes the file's first B
rows, starting again from its first row when B exceeds them (one sample
repeated to batch 32, or the first 8 of 32 rows).  Each plan says which, and
records the file's path, shape and SHA-256: the bytes a number came from.
The parent reads the file's header and hash once; the cell's process hashes
the bytes it loads again and refuses them if the file changed in between.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.core.tensors import TensorInfo

_HASHES: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True)
class GivenInput:
    name: str
    value: int | float | bool | None = None
    file: str | None = None  # absolute path of the .npy file
    sha256: str | None = None
    shape: tuple[int, ...] | None = None  # the file's array
    dtype: str | None = None

    @property
    def flag(self) -> str:
        return f"--input {self.name}={self.file if self.file else _text(self.value)}"

    def identity(self) -> dict[str, Any]:
        """What makes two cells' inputs the same: the value, or the file's bytes (not its path)."""
        if self.file is None:
            return {"value": self.value}
        return {"sha256": self.sha256, "shape": list(self.shape), "dtype": self.dtype}

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if v is not None}
        if self.shape is not None:
            d["shape"] = list(self.shape)
        return d


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def numpy_dtype(name: str):
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise UserError("bfloat16 inputs need the ml_dtypes package (pip install ml_dtypes)") from None
        return ml_dtypes.bfloat16
    return np.dtype(name)


def _sha256(path: str) -> str:
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def read(name: str, raw: Any) -> GivenInput:
    """What one ``--input`` (or the request's ``inputs[name]``) stands for; files read once."""
    if isinstance(raw, GivenInput):
        return raw
    if isinstance(raw, dict):  # a cell's payload, or a record's
        d = dict(raw, name=name)
        if d.get("shape") is not None:
            d["shape"] = tuple(d["shape"])
        return GivenInput(**d)
    if isinstance(raw, (bool, int, float, np.generic)) and not isinstance(raw, (str, bytes)):
        return GivenInput(name, value=raw.item() if isinstance(raw, np.generic) else raw)
    if not isinstance(raw, (str, Path)):
        raise UserError(
            f"--input {name}: expected a number, true/false or a .npy file, got {type(raw).__name__}"
        )
    path = os.path.abspath(os.path.expanduser(str(raw)))
    flag = f"--input {name}={raw}"
    if not str(raw).lower().endswith(".npy"):
        raise UserError(f"{flag}: not a number, true/false or a .npy file")
    if not os.path.isfile(path):
        raise UserError(f"{flag}: no such file")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UserError(f"{flag}: not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind in "OUSV":
        raise UserError(f"{flag}: holds {arr.dtype}; dlbench feeds numeric and boolean arrays")
    return GivenInput(
        name, file=path, sha256=_sha256(path), shape=tuple(int(d) for d in arr.shape), dtype=str(arr.dtype)
    )


def read_all(raw: dict[str, Any] | None) -> dict[str, GivenInput]:
    return {name: read(name, v) for name, v in (raw or {}).items()}


def check(g: GivenInput, t: TensorInfo) -> None:
    """UserError unless ``g`` can be fed to ``t`` unchanged in meaning."""
    want = numpy_dtype(t.dtype)
    kind = "f" if t.dtype == "bfloat16" else want.kind
    if g.file is not None:
        _check_file(g, t, want)
        return
    v = g.value
    if kind == "b":
        if not (isinstance(v, bool) or v in (0, 1)):
            raise UserError(f"{g.flag}: input {t.name!r} is bool; give true/false (or 1/0)")
        return
    if isinstance(v, bool):
        raise UserError(f"{g.flag}: input {t.name!r} is {t.dtype}; true/false is for bool inputs")
    if kind in "iu":
        if isinstance(v, float) and not v.is_integer():
            raise UserError(f"{g.flag}: input {t.name!r} is {t.dtype}; the value must be an integer")
        info = np.iinfo(want)
        if not info.min <= v <= info.max:
            raise UserError(f"{g.flag}: {_text(v)} does not fit {t.dtype} [{info.min}, {info.max}]")
        return
    with np.errstate(over="ignore", invalid="ignore"):
        back = np.asarray(v, dtype=want).astype(np.complex128 if kind == "c" else np.float64)
    if not np.isfinite(back):
        raise UserError(f"{g.flag}: {_text(v)} is out of {t.dtype}'s range")
    if isinstance(v, int) and back != v:
        raise UserError(
            f"{g.flag}: {v} is not exactly representable in {t.dtype} (it would become {back.real:.17g})"
        )


def _check_file(g: GivenInput, t: TensorInfo, want) -> None:
    shown = "x".join(map(str, g.shape)) or "a scalar"
    if any(n < 1 for n in g.shape):
        raise UserError(f"{g.flag}: the array is empty ({shown})")
    if len(g.shape) != len(t.shape):
        raise UserError(
            f"{g.flag}: the array is {shown} ({len(g.shape)} dimensions), but input "
            f"{t.name!r} has {len(t.shape)}"
        )
    for i, (d, n) in enumerate(zip(t.shape, g.shape)):
        if isinstance(d, int) and d != n:
            raise UserError(
                f"{g.flag}: the array is {shown}, but dimension {i} of input {t.name!r} is fixed at {d}"
            )
    have = numpy_dtype(g.dtype)
    try:
        safe = np.can_cast(have, want, casting="safe")
    except TypeError:
        safe = False
    if not safe:
        raise UserError(
            f"{g.flag}: the array is {g.dtype} and input {t.name!r} is {t.dtype}; "
            f"{g.dtype} does not cast safely to {t.dtype}: save it as {t.dtype}"
        )


def rows_note(g: GivenInput, batch: int) -> str | None:
    """What a cell at ``batch`` takes from a file whose dimension 0 is the batch."""
    rows = g.shape[0]
    if rows == batch:
        return None
    if rows > batch:
        return f"the first {batch} of its {rows} rows"
    return f"its {rows} row{'s' if rows > 1 else ''} repeated to batch {batch}"


def array(g: GivenInput, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The input's array: ``g``'s value everywhere, or the file's bytes cast and batched."""
    want = numpy_dtype(dtype)
    if g.file is None:
        return np.full(shape, g.value, dtype=want)
    try:
        data = Path(g.file).read_bytes()
    except OSError as exc:
        raise UserError(f"{g.flag}: cannot read it ({exc.strerror or exc})") from None
    if g.sha256 and hashlib.sha256(data).hexdigest() != g.sha256:
        raise UserError(f"{g.flag}: the file changed after the sweep was planned")
    arr = np.load(io.BytesIO(data), allow_pickle=False).astype(want, copy=False)
    if shape and arr.shape and arr.shape[0] != shape[0]:  # the plan checked: the batch
        arr = np.take(arr, np.arange(shape[0]) % arr.shape[0], axis=0)
    if arr.shape != tuple(shape):
        raise UserError(
            f"{g.flag}: the array is {'x'.join(map(str, arr.shape))}, the plan {'x'.join(map(str, shape))}"
        )
    return np.asarray(arr, order="C")  # not ascontiguousarray: it makes 0-d 1-d
